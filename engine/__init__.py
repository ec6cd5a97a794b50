"""Coppice engine: ensemble learning in pure NumPy."""
