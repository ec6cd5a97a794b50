"""Registered models: names with numbered versions and movable aliases (``name@alias``)."""
