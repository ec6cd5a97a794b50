"""Decision trees grown on quantile-binned features."""

from engine.tree._classes import DecisionTreeClassifier, DecisionTreeRegressor
from engine.tree._tree import Tree

__all__ = ["DecisionTreeClassifier", "DecisionTreeRegressor", "Tree"]
