"""Hyper-parameter searches: candidates as ordinary jobs, leaderboards, stacked ensembles.

Kept free of imports: the worker imports ``service.searches.predictions`` on its hot path.
"""
