"""Fitted models: listing, reading, deleting, predicting, curves and feature importances."""
