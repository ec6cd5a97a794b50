"""Decision trees grown on quantile-binned features."""

from engine.tree._binned import Binned, BinningPlan
from engine.tree._classes import DecisionTreeClassifier, DecisionTreeRegressor
from engine.tree._tree import Tree

__all__ = ["Binned", "BinningPlan", "DecisionTreeClassifier", "DecisionTreeRegressor", "Tree"]
