"""The registry of comparisons: each engine estimator beside its scikit-learn counterpart.

A :class:`Comparison` names one estimator family, the engine's model, the scikit-learn model
every ratio is taken against, and any further peers (LightGBM, XGBoost) whose figures are
shown beside them. Adding a row (gradient boosting, say) is one more ``Comparison`` with three
factory functions.

Factories are module-level functions that import their library on call: the measured child
process unpickles them by name and imports only the library it is about to time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.datasets import Task

__all__ = [
    "BAG_FRACTION",
    "COMPARISONS",
    "LEAF_BUDGET",
    "SKLEARN_HIST",
    "BuildContext",
    "Comparison",
    "ModelSpec",
    "features_per_split",
]

# LightGBM and XGBoost sample rows without replacement; 0.632 is the expected share of distinct
# rows in a bootstrap sample, so their trees see as many distinct rows as a random forest's.
BAG_FRACTION = 0.632

# Leaf cap for LightGBM and XGBoost. Unbounded, their trees on the 80k-row regression set grow
# ~50k leaves each and took 25-140 s per tree on the 2-core machine (LightGBM's leaf-wise search
# and XGBoost's lossguide policy scale with the number of leaves, and XGBoost's per-node
# histograms reached 5 GB). The classification trees stop at ~6-7k leaves on their own, so
# there the cap does not bind and the trees are fully grown.
LEAF_BUDGET = 8192

# XGBoost grows depth-wise (batched per level, several times faster here than lossguide) to
# this depth, deeper than any tree reaches under LEAF_BUDGET.
XGBOOST_MAX_DEPTH = 30


@dataclass(frozen=True)
class BuildContext:
    """What a factory knows when it builds an unfitted model."""

    task: Task
    n_features: int
    n_train: int
    n_estimators: int
    n_jobs: int
    random_state: int


Factory = Callable[[BuildContext], Any]


@dataclass(frozen=True)
class ModelSpec:
    """One library's model in a comparison: a factory and a line saying how it is configured."""

    library: str
    build: Factory
    settings: str


# A further scikit-learn model shown beside the reference (HistGradientBoosting beside
# GradientBoosting): it needs nothing beyond scikit-learn, so it runs whatever --peers says.
SKLEARN_HIST = "scikit-learn-hist"


@dataclass(frozen=True)
class Comparison:
    """One estimator family: ours, the scikit-learn reference, and extra peers."""

    family: str
    ours: ModelSpec
    reference: ModelSpec
    peers: tuple[ModelSpec, ...] = ()

    def models(self, peer_libraries: frozenset[str]) -> tuple[ModelSpec, ...]:
        """Ours first, then the reference, then the requested peers: the interleaving order."""
        extra = tuple(
            peer
            for peer in self.peers
            if peer.library in peer_libraries or peer.library == SKLEARN_HIST
        )
        return (self.ours, self.reference, *extra)


def features_per_split(max_features: str | float, n_features: int) -> int:
    """scikit-learn's rule for how many features a split examines."""
    if max_features == "sqrt":
        return max(1, int(math.sqrt(n_features)))
    return max(1, int(float(max_features) * n_features))


def _forest_max_features(task: Task) -> str | float:
    # scikit-learn's RandomForestRegressor defaults to all features; the engine to 1/3. Both
    # get 1/3 so that the comparison is of implementations, not of settings.
    return "sqrt" if task == "classification" else 1.0 / 3.0


def _node_fraction(ctx: BuildContext) -> float:
    """The per-node feature fraction that makes LightGBM and XGBoost draw as many features as
    scikit-learn's ``max_features``: sqrt(p)/p for classification, 1/3 for regression.

    LightGBM rounds ``fraction * p`` and XGBoost truncates it, so k/p may land on k - 1 or
    k + 1 features; (k + 0.25)/p gives exactly k in both.
    """
    k = features_per_split(_forest_max_features(ctx.task), ctx.n_features)
    return min(1.0, (k + 0.25) / ctx.n_features)


def _pick(ctx: BuildContext, classifier: type[Any], regressor: type[Any]) -> type[Any]:
    return classifier if ctx.task == "classification" else regressor


# --- random forest ---------------------------------------------------------------------------


def coppice_random_forest(ctx: BuildContext) -> Any:
    from engine import RandomForestClassifier, RandomForestRegressor

    cls = _pick(ctx, RandomForestClassifier, RandomForestRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        max_features=_forest_max_features(ctx.task),
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
    )


def sklearn_random_forest(ctx: BuildContext) -> Any:
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = _pick(ctx, RandomForestClassifier, RandomForestRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        max_features=_forest_max_features(ctx.task),
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
    )


def lightgbm_random_forest(ctx: BuildContext) -> Any:
    from lightgbm import LGBMClassifier, LGBMRegressor

    cls = _pick(ctx, LGBMClassifier, LGBMRegressor)
    bagged_rows = int(BAG_FRACTION * ctx.n_train)
    return cls(
        boosting_type="rf",
        n_estimators=ctx.n_estimators,
        num_leaves=max(2, min(LEAF_BUDGET, bagged_rows)),
        max_depth=-1,
        min_child_samples=1,
        # The scikit-learn names of bagging_fraction and bagging_freq; passing the native
        # names as well would make LightGBM warn about the ignored aliases.
        subsample=BAG_FRACTION,
        subsample_freq=1,
        feature_fraction_bynode=_node_fraction(ctx),
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
        verbose=-1,
    )


def xgboost_random_forest(ctx: BuildContext) -> Any:
    from xgboost import XGBRFClassifier, XGBRFRegressor

    cls = _pick(ctx, XGBRFClassifier, XGBRFRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        tree_method="hist",
        grow_policy="depthwise",
        max_depth=XGBOOST_MAX_DEPTH,
        max_leaves=LEAF_BUDGET,
        # A leaf may hold a single row, as in scikit-learn's fully grown trees (a logistic
        # row's hessian is below XGBoost's default min_child_weight of 1).
        min_child_weight=0.0,
        subsample=BAG_FRACTION,
        colsample_bynode=_node_fraction(ctx),
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
    )


# --- extra trees ------------------------------------------------------------------------------


def _extra_trees_max_features(task: Task) -> str | float:
    return "sqrt" if task == "classification" else 1.0  # both libraries' defaults, stated


def coppice_extra_trees(ctx: BuildContext) -> Any:
    from engine import ExtraTreesClassifier, ExtraTreesRegressor

    cls = _pick(ctx, ExtraTreesClassifier, ExtraTreesRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        max_features=_extra_trees_max_features(ctx.task),
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
    )


def sklearn_extra_trees(ctx: BuildContext) -> Any:
    from sklearn.ensemble import ExtraTreesClassifier, ExtraTreesRegressor

    cls = _pick(ctx, ExtraTreesClassifier, ExtraTreesRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        max_features=_extra_trees_max_features(ctx.task),
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
    )


# --- bagging ----------------------------------------------------------------------------------


def coppice_bagging(ctx: BuildContext) -> Any:
    from engine import BaggingClassifier, BaggingRegressor

    cls = _pick(ctx, BaggingClassifier, BaggingRegressor)
    return cls(n_estimators=ctx.n_estimators, n_jobs=ctx.n_jobs, random_state=ctx.random_state)


def sklearn_bagging(ctx: BuildContext) -> Any:
    from sklearn.ensemble import BaggingClassifier, BaggingRegressor

    cls = _pick(ctx, BaggingClassifier, BaggingRegressor)
    return cls(n_estimators=ctx.n_estimators, n_jobs=ctx.n_jobs, random_state=ctx.random_state)


# --- stacking ---------------------------------------------------------------------------------

STACKING_DEPTH = 8  # the tree member's depth: a stronger learner than a stump, cheap to fit


def coppice_stacking(ctx: BuildContext) -> Any:
    from engine import (
        DecisionTreeClassifier,
        DecisionTreeRegressor,
        GaussianNB,
        LogisticRegression,
        Ridge,
        StackingClassifier,
        StackingRegressor,
    )

    tree = {"max_depth": STACKING_DEPTH, "random_state": ctx.random_state}
    if ctx.task == "classification":
        members = [
            ("lr", LogisticRegression()),
            ("nb", GaussianNB()),
            ("tree", DecisionTreeClassifier(**tree)),
        ]
        return StackingClassifier(
            members, LogisticRegression(), n_jobs=ctx.n_jobs, random_state=ctx.random_state
        )
    members = [("ridge", Ridge()), ("tree", DecisionTreeRegressor(**tree))]
    return StackingRegressor(members, Ridge(), n_jobs=ctx.n_jobs, random_state=ctx.random_state)


def sklearn_stacking(ctx: BuildContext) -> Any:
    from sklearn.ensemble import StackingClassifier, StackingRegressor
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.model_selection import KFold, StratifiedKFold
    from sklearn.naive_bayes import GaussianNB
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    tree = {"max_depth": STACKING_DEPTH, "random_state": ctx.random_state}
    folds = {"n_splits": 5, "shuffle": True, "random_state": ctx.random_state}
    if ctx.task == "classification":
        members = [
            ("lr", LogisticRegression()),
            ("nb", GaussianNB()),
            ("tree", DecisionTreeClassifier(**tree)),
        ]
        return StackingClassifier(
            members, LogisticRegression(), cv=StratifiedKFold(**folds), n_jobs=ctx.n_jobs
        )
    members = [("ridge", Ridge()), ("tree", DecisionTreeRegressor(**tree))]
    return StackingRegressor(members, Ridge(), cv=KFold(**folds), n_jobs=ctx.n_jobs)


def coppice_voting(ctx: BuildContext) -> Any:
    from engine import (
        DecisionTreeClassifier,
        DecisionTreeRegressor,
        GaussianNB,
        LogisticRegression,
        Ridge,
        VotingClassifier,
        VotingRegressor,
    )

    tree = {"max_depth": STACKING_DEPTH, "random_state": ctx.random_state}
    if ctx.task == "classification":
        members = [
            ("lr", LogisticRegression()),
            ("nb", GaussianNB()),
            ("tree", DecisionTreeClassifier(**tree)),
        ]
        return VotingClassifier(members, voting="soft", n_jobs=ctx.n_jobs)
    members = [("ridge", Ridge()), ("tree", DecisionTreeRegressor(**tree))]
    return VotingRegressor(members, n_jobs=ctx.n_jobs)


def sklearn_voting(ctx: BuildContext) -> Any:
    from sklearn.ensemble import VotingClassifier, VotingRegressor
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.naive_bayes import GaussianNB
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    tree = {"max_depth": STACKING_DEPTH, "random_state": ctx.random_state}
    if ctx.task == "classification":
        members = [
            ("lr", LogisticRegression()),
            ("nb", GaussianNB()),
            ("tree", DecisionTreeClassifier(**tree)),
        ]
        return VotingClassifier(members, voting="soft", n_jobs=ctx.n_jobs)
    members = [("ridge", Ridge()), ("tree", DecisionTreeRegressor(**tree))]
    return VotingRegressor(members, n_jobs=ctx.n_jobs)


# --- boosting ---------------------------------------------------------------------------------

# Shared by every boosting comparison: the settings the targets are stated for.
BOOSTING_LEARNING_RATE = 0.1
GRADIENT_BOOSTING_DEPTH = 3
XGBOOST_DEPTH = 6
XGBOOST_MAX_BINS = 255
# AdaBoost's targets are for 200 stumps: twice --trees (100 by default, 10 with --quick).
ADABOOST_ROUNDS_PER_TREE = 2


def coppice_gradient_boosting(ctx: BuildContext) -> Any:
    from engine import GradientBoostingClassifier, GradientBoostingRegressor

    cls = _pick(ctx, GradientBoostingClassifier, GradientBoostingRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        learning_rate=BOOSTING_LEARNING_RATE,
        max_depth=GRADIENT_BOOSTING_DEPTH,
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
    )


def sklearn_gradient_boosting(ctx: BuildContext) -> Any:
    from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

    cls = _pick(ctx, GradientBoostingClassifier, GradientBoostingRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        learning_rate=BOOSTING_LEARNING_RATE,
        max_depth=GRADIENT_BOOSTING_DEPTH,
        random_state=ctx.random_state,
    )


def _sklearn_hist_boosting(ctx: BuildContext, max_depth: int, **params: Any) -> Any:
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits

    cls = _pick(ctx, HistGradientBoostingClassifier, HistGradientBoostingRegressor)
    # It has no n_jobs: its OpenMP threads default to one per core. The limit is set in the
    # measured child (where factories run) and holds for the rest of that short-lived process.
    threadpool_limits(ctx.n_jobs, user_api="openmp")
    return cls(
        max_iter=ctx.n_estimators,
        learning_rate=BOOSTING_LEARNING_RATE,
        max_depth=max_depth,
        max_leaf_nodes=None,  # depth-wise trees, as the others grow
        early_stopping=False,
        random_state=ctx.random_state,
        **params,
    )


def sklearn_hist_gradient_boosting(ctx: BuildContext) -> Any:
    return _sklearn_hist_boosting(ctx, GRADIENT_BOOSTING_DEPTH)


def coppice_xgboost(ctx: BuildContext) -> Any:
    from engine import XGBoostClassifier, XGBoostRegressor

    cls = _pick(ctx, XGBoostClassifier, XGBoostRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        learning_rate=BOOSTING_LEARNING_RATE,
        max_depth=XGBOOST_DEPTH,
        reg_lambda=1.0,
        min_child_weight=1.0,
        max_bins=XGBOOST_MAX_BINS,
        tree_method="hist",
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
    )


def sklearn_hist_xgboost(ctx: BuildContext) -> Any:
    # No min_child_weight: min_samples_leaf=1 leaves its default hessian floor (1e-3) alone.
    return _sklearn_hist_boosting(
        ctx,
        XGBOOST_DEPTH,
        l2_regularization=1.0,
        min_samples_leaf=1,
        max_bins=XGBOOST_MAX_BINS,
    )


def xgboost_xgboost(ctx: BuildContext) -> Any:
    from xgboost import XGBClassifier, XGBRegressor

    cls = _pick(ctx, XGBClassifier, XGBRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        learning_rate=BOOSTING_LEARNING_RATE,
        max_depth=XGBOOST_DEPTH,
        reg_lambda=1.0,
        min_child_weight=1.0,
        max_bin=XGBOOST_MAX_BINS,
        tree_method="hist",
        grow_policy="depthwise",
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
    )


def lightgbm_xgboost(ctx: BuildContext) -> Any:
    from lightgbm import LGBMClassifier, LGBMRegressor

    cls = _pick(ctx, LGBMClassifier, LGBMRegressor)
    return cls(
        n_estimators=ctx.n_estimators,
        learning_rate=BOOSTING_LEARNING_RATE,
        max_depth=XGBOOST_DEPTH,
        num_leaves=2**XGBOOST_DEPTH,  # so that the depth, not the leaf budget, binds
        reg_lambda=1.0,
        min_child_weight=1.0,
        min_child_samples=1,  # the hessian floor above is the only leaf-size rule
        max_bin=XGBOOST_MAX_BINS,
        n_jobs=ctx.n_jobs,
        random_state=ctx.random_state,
        verbose=-1,
    )


def coppice_adaboost(ctx: BuildContext) -> Any:
    from engine import AdaBoostClassifier, AdaBoostRegressor

    cls = _pick(ctx, AdaBoostClassifier, AdaBoostRegressor)
    return cls(
        n_estimators=ADABOOST_ROUNDS_PER_TREE * ctx.n_estimators,
        random_state=ctx.random_state,
        n_jobs=ctx.n_jobs,
    )


def sklearn_adaboost(ctx: BuildContext) -> Any:
    from sklearn.ensemble import AdaBoostClassifier, AdaBoostRegressor

    cls = _pick(ctx, AdaBoostClassifier, AdaBoostRegressor)
    return cls(
        n_estimators=ADABOOST_ROUNDS_PER_TREE * ctx.n_estimators, random_state=ctx.random_state
    )


# --- the registry -----------------------------------------------------------------------------

_FOREST = "full depth, bootstrap, max_features='sqrt' (classification) / 1/3 (regression)"
_GRADIENT_BOOSTING = (
    f"n_estimators=--trees, learning_rate={BOOSTING_LEARNING_RATE}, "
    f"max_depth={GRADIENT_BOOSTING_DEPTH}"
)
_XGBOOST = (
    f"n_estimators=--trees, learning_rate={BOOSTING_LEARNING_RATE}, max_depth={XGBOOST_DEPTH}, "
    f"reg_lambda=1, min_child_weight=1, max_bin(s)={XGBOOST_MAX_BINS}"
)
_ADABOOST = (
    f"n_estimators={ADABOOST_ROUNDS_PER_TREE}×--trees, each library's default learner "
    "(classification: a stump, SAMME; regression: AdaBoost.R2, depth-3 tree, linear loss); "
    "coppice n_jobs=--n-jobs threads (scikit-learn's has no n_jobs)"
)

COMPARISONS: tuple[Comparison, ...] = (
    Comparison(
        "random_forest",
        ours=ModelSpec("coppice", coppice_random_forest, _FOREST),
        reference=ModelSpec("scikit-learn", sklearn_random_forest, _FOREST),
        peers=(
            ModelSpec(
                "lightgbm",
                lightgbm_random_forest,
                f"boosting_type='rf', bagging_fraction={BAG_FRACTION}, bagging_freq=1, "
                f"feature_fraction_bynode ≈ sqrt(p)/p or 1/3 (same feature count as "
                f"scikit-learn), num_leaves=min({LEAF_BUDGET}, bagged rows), "
                "min_child_samples=1",
            ),
            ModelSpec(
                "xgboost",
                xgboost_random_forest,
                f"XGBRF*, tree_method='hist', depthwise, max_depth={XGBOOST_MAX_DEPTH}, "
                f"max_leaves={LEAF_BUDGET}, subsample={BAG_FRACTION}, colsample_bynode as "
                "LightGBM, min_child_weight=0",
            ),
        ),
    ),
    Comparison(
        "extra_trees",
        ours=ModelSpec(
            "coppice",
            coppice_extra_trees,
            "full depth, no bootstrap, max_features='sqrt' (classification) / 1.0 (regression)",
        ),
        reference=ModelSpec(
            "scikit-learn",
            sklearn_extra_trees,
            "full depth, no bootstrap, max_features='sqrt' (classification) / 1.0 (regression)",
        ),
    ),
    Comparison(
        "bagging",
        ours=ModelSpec(
            "coppice",
            coppice_bagging,
            "default member (engine decision tree, all features), bootstrap",
        ),
        reference=ModelSpec(
            "scikit-learn",
            sklearn_bagging,
            "default member (DecisionTree*, all features), bootstrap",
        ),
    ),
    Comparison(
        "stacking",
        ours=ModelSpec(
            "coppice",
            coppice_stacking,
            f"engine members LogisticRegression + GaussianNB + tree (max_depth={STACKING_DEPTH})"
            " / Ridge + tree, final LogisticRegression / Ridge, 5 shuffled (stratified) folds",
        ),
        reference=ModelSpec(
            "scikit-learn",
            sklearn_stacking,
            "the same members and final estimator from scikit-learn, (Stratified)KFold(5, "
            "shuffle=True)",
        ),
    ),
    Comparison(
        "voting",
        ours=ModelSpec(
            "coppice",
            coppice_voting,
            "soft vote of engine LogisticRegression + GaussianNB + tree "
            f"(max_depth={STACKING_DEPTH}) / mean of Ridge + tree",
        ),
        reference=ModelSpec(
            "scikit-learn", sklearn_voting, "the same members from scikit-learn, soft vote / mean"
        ),
    ),
    Comparison(
        "gradient_boosting",
        ours=ModelSpec("coppice", coppice_gradient_boosting, _GRADIENT_BOOSTING),
        reference=ModelSpec(
            "scikit-learn",
            sklearn_gradient_boosting,
            f"GradientBoosting* (exact splits), {_GRADIENT_BOOSTING}",
        ),
        peers=(
            ModelSpec(
                SKLEARN_HIST,
                sklearn_hist_gradient_boosting,
                f"HistGradientBoosting*, max_iter=--trees, {_GRADIENT_BOOSTING}, "
                "max_leaf_nodes=None, early_stopping=False",
            ),
        ),
    ),
    Comparison(
        "xgboost",
        ours=ModelSpec("coppice", coppice_xgboost, f"XGBoost*, tree_method='hist', {_XGBOOST}"),
        reference=ModelSpec(
            "scikit-learn",
            sklearn_hist_xgboost,
            f"HistGradientBoosting*, max_iter=--trees, learning_rate={BOOSTING_LEARNING_RATE}, "
            f"max_depth={XGBOOST_DEPTH}, max_leaf_nodes=None, l2_regularization=1, "
            f"min_samples_leaf=1, max_bins={XGBOOST_MAX_BINS}, early_stopping=False",
        ),
        peers=(
            ModelSpec(
                "lightgbm",
                lightgbm_xgboost,
                f"LGBM*, {_XGBOOST}, num_leaves={2**XGBOOST_DEPTH}, min_child_samples=1",
            ),
            ModelSpec(
                "xgboost",
                xgboost_xgboost,
                f"XGB*, tree_method='hist', grow_policy='depthwise', {_XGBOOST}",
            ),
        ),
    ),
    Comparison(
        "adaboost",
        ours=ModelSpec("coppice", coppice_adaboost, _ADABOOST),
        reference=ModelSpec("scikit-learn", sklearn_adaboost, _ADABOOST),
    ),
)
