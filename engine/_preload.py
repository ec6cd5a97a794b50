"""Imported by fork servers before they fork: loads the engine's kernels once, so every
process forked from the server starts with them (see :mod:`engine.warmup`)."""

from engine.warmup import warm_kernels

warm_kernels()
