"""Coppice engine: ensemble learning in pure NumPy.

Estimators follow scikit-learn's contract (``fit``/``predict``/``predict_proba``/``score``,
``get_params``/``set_params``) without importing scikit-learn::

    from engine import RandomForestClassifier, explain

    model = RandomForestClassifier(n_estimators=200, n_jobs=2, random_state=0).fit(X, y)
    why = explain(model, X[:5])  # per-row, per-feature contributions and their bias
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
from engine.callbacks import ProgressEvent, StopTraining, TrainingInterrupted
from engine.cluster import ConsensusClustering, KMeans, adjusted_rand_score, clustering_stability
from engine.combine import (
    GradingClassifier,
    StackingClassifier,
    StackingRegressor,
    VotingClassifier,
    VotingRegressor,
)
from engine.diagnostics import bias_variance_decomposition, ensemble_diversity
from engine.early_stopping import EarlyStopping
from engine.ensemble import (
    BaggingClassifier,
    BaggingRegressor,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from engine.explain import Explanation, explain
from engine.explain._tree_sums import tree_contributions
from engine.fusion import (
    BKSCombiner,
    DependenceTreeCombiner,
    MixtureOfExpertsClassifier,
    MixtureOfExpertsRegressor,
    NaiveBayesCombiner,
    SVDCombiner,
    WerneckeCombiner,
)
from engine.inspection import permutation_importance
from engine.linear import LinearRegression, LogisticRegression, Perceptron, Ridge
from engine.naive_bayes import GaussianNB
from engine.neighbors import KNeighborsClassifier, KNeighborsRegressor
from engine.parallel import parallel_backend
from engine.persistence import (
    ModelFormatError,
    ModelPieces,
    load_model,
    model_manifest,
    save_model,
    save_model_pieces,
)
from engine.preprocessing import EncodedClassifier, EncodedRegressor
from engine.tree import DecisionTreeClassifier, DecisionTreeRegressor

__all__ = [
    "AdaBoostClassifier",
    "AdaBoostRegressor",
    "ArcX4Classifier",
    "BKSCombiner",
    "BaggingClassifier",
    "BaggingRegressor",
    "ConsensusClustering",
    "DecisionTreeClassifier",
    "DecisionTreeRegressor",
    "DependenceTreeCombiner",
    "EarlyStopping",
    "EncodedClassifier",
    "EncodedRegressor",
    "Explanation",
    "ExtraTreesClassifier",
    "ExtraTreesRegressor",
    "GaussianNB",
    "GradientBoostingClassifier",
    "GradientBoostingRegressor",
    "GradingClassifier",
    "KMeans",
    "KNeighborsClassifier",
    "KNeighborsRegressor",
    "LinearRegression",
    "LogisticRegression",
    "MixtureOfExpertsClassifier",
    "MixtureOfExpertsRegressor",
    "ModelFormatError",
    "ModelPieces",
    "NaiveBayesCombiner",
    "Perceptron",
    "ProgressEvent",
    "RandomForestClassifier",
    "RandomForestRegressor",
    "RegionBoostClassifier",
    "Ridge",
    "SVDCombiner",
    "StackingClassifier",
    "StackingRegressor",
    "StopTraining",
    "TrainingInterrupted",
    "VotingClassifier",
    "VotingRegressor",
    "WerneckeCombiner",
    "XGBoostClassifier",
    "XGBoostRegressor",
    "adjusted_rand_score",
    "bias_variance_decomposition",
    "clustering_stability",
    "ensemble_diversity",
    "explain",
    "load_model",
    "model_manifest",
    "parallel_backend",
    "permutation_importance",
    "save_model",
    "save_model_pieces",
    "tree_contributions",
]
