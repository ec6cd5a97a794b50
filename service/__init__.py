"""Coppice HTTP service."""
