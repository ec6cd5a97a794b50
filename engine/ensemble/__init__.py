"""Ensembles of independently fitted members: bagging, random forests, extra trees."""

from engine.ensemble._bagging import BaggingClassifier, BaggingRegressor
from engine.ensemble._forest import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

__all__ = [
    "BaggingClassifier",
    "BaggingRegressor",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "RandomForestClassifier",
    "RandomForestRegressor",
]
