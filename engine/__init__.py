"""Coppice engine: ensemble learning in pure NumPy.

Estimators follow scikit-learn's contract (``fit``/``predict``/``predict_proba``/``score``,
``get_params``/``set_params``) without importing scikit-learn::

    from engine import RandomForestClassifier

    model = RandomForestClassifier(n_estimators=200, n_jobs=2, random_state=0).fit(X, y)
"""

from engine import _model_classes  # noqa: F401  (registers the loadable classes)
from engine.boosting import (
    AdaBoostClassifier,
    AdaBoostRegressor,
    ArcX4Classifier,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RegionBoostClassifier,
    XGBoostClassifier,
    XGBoostRegressor,
)
from engine.callbacks import ProgressEvent, TrainingInterrupted
from engine.ensemble import (
    BaggingClassifier,
    BaggingRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from engine.inspection import permutation_importance
from engine.linear import LinearRegression, LogisticRegression, Perceptron, Ridge
from engine.naive_bayes import GaussianNB
from engine.neighbors import KNeighborsClassifier, KNeighborsRegressor
from engine.persistence import ModelFormatError, load_model, model_manifest, save_model
from engine.preprocessing import EncodedClassifier, EncodedRegressor
from engine.shap import tree_contributions
from engine.tree import DecisionTreeClassifier, DecisionTreeRegressor

__all__ = [
    "AdaBoostClassifier",
    "AdaBoostRegressor",
    "ArcX4Classifier",
    "BaggingClassifier",
    "BaggingRegressor",
    "DecisionTreeClassifier",
    "DecisionTreeRegressor",
    "EncodedClassifier",
    "EncodedRegressor",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "GaussianNB",
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
    "KNeighborsClassifier",
    "KNeighborsRegressor",
    "LinearRegression",
    "LogisticRegression",
    "ModelFormatError",
    "Perceptron",
    "ProgressEvent",
    "RandomForestClassifier",
    "RandomForestRegressor",
    "RegionBoostClassifier",
    "Ridge",
    "TrainingInterrupted",
    "XGBoostClassifier",
    "XGBoostRegressor",
    "load_model",
    "model_manifest",
    "permutation_importance",
    "save_model",
    "tree_contributions",
]
