"""Every class a saved model may contain, registered for :func:`engine.load_model`.

Loading instantiates only registered classes, so this list is the whole surface a model file
can reach; keep it to estimators and the plain state objects they hold.
"""

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
from engine.cluster import ConsensusClustering, KMeans
from engine.combine import (
    GradingClassifier,
    StackingClassifier,
    StackingRegressor,
    VotingClassifier,
    VotingRegressor,
)
from engine.ensemble._bagging import BaggingClassifier, BaggingRegressor, EstimatorMember
from engine.ensemble._forest import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from engine.ensemble._sampling import MemberSampling
from engine.fusion import (
    BKSCombiner,
    DependenceTreeCombiner,
    MixtureOfExpertsClassifier,
    MixtureOfExpertsRegressor,
    NaiveBayesCombiner,
    SVDCombiner,
    WerneckeCombiner,
)
from engine.linear import LinearRegression, LogisticRegression, Perceptron, Ridge
from engine.naive_bayes import GaussianNB
from engine.neighbors import KNeighborsClassifier, KNeighborsRegressor
from engine.persistence import register_model_class
from engine.preprocessing import DenseEncoding, EncodedClassifier, EncodedRegressor
from engine.tree._binning import BinMapper
from engine.tree._classes import DecisionTreeClassifier, DecisionTreeRegressor
from engine.tree._tree import Tree

MODEL_CLASSES: tuple[type, ...] = (
    AdaBoostClassifier,
    AdaBoostRegressor,
    ArcX4Classifier,
    BaggingClassifier,
    BaggingRegressor,
    BinMapper,
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    DenseEncoding,
    EncodedClassifier,
    EncodedRegressor,
    EstimatorMember,
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GaussianNB,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    KNeighborsClassifier,
    KNeighborsRegressor,
    LinearRegression,
    LogisticRegression,
    MemberSampling,
    Perceptron,
    RandomForestClassifier,
    RandomForestRegressor,
    RegionBoostClassifier,
    Ridge,
    Tree,
    XGBoostClassifier,
    XGBoostRegressor,
    # The combiners (engine.combine).
    GradingClassifier,
    StackingClassifier,
    StackingRegressor,
    VotingClassifier,
    VotingRegressor,
    # Clustering (engine.cluster).
    ConsensusClustering,
    KMeans,
    # Label fusion and the mixture of experts (engine.fusion).
    BKSCombiner,
    DependenceTreeCombiner,
    MixtureOfExpertsClassifier,
    MixtureOfExpertsRegressor,
    NaiveBayesCombiner,
    SVDCombiner,
    WerneckeCombiner,
)

for _cls in MODEL_CLASSES:
    register_model_class(_cls)
