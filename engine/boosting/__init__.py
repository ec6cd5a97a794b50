"""Boosting: AdaBoost and its relatives (arcing, RegionBoost) and Friedman's gradient boosting."""

from engine.boosting._adaboost import AdaBoostClassifier
from engine.boosting._adaboost_r2 import AdaBoostRegressor
from engine.boosting._arcing import ArcX4Classifier, RegionBoostClassifier
from engine.boosting._gradient import GradientBoostingClassifier, GradientBoostingRegressor

__all__ = [
    "AdaBoostClassifier",
    "AdaBoostRegressor",
    "ArcX4Classifier",
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
    "RegionBoostClassifier",
]
