"""The vectorised split search against its plain-loop reference and against the math.

``find_splits`` searches a whole batch of nodes at once through a group table, and its compiled
twin (``compiled_find_splits``) node by node; every optimised kernel keeps a naive reference
beside it (``find_splits_naive``), and these tests, run on both implementations, hold them
equal on many small random problems: several nodes per batch, ``-1`` padded candidate lists,
gini / entropy / squared error, weights, ``min_samples_leaf`` and ``min_weight_leaf``, missing
bins and categorical features. The reported split is then replayed through ``left_codes`` and
its gain recomputed from first principles (impurities from proportions, variances from the
targets), which holds both implementations to the criteria rather than to each other.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pytest
from numpy.typing import NDArray

from engine.tree._binning import MISSING_BIN
from engine.tree.split import vectorised as _splitter
from engine.tree.split.compiled import compiled_find_splits
from engine.tree.split.context import SplitContext, Splits
from engine.tree.split.vectorised import find_splits, find_splits_naive

# Gains are differences of criterion scores (sums of O(W) or O(Σwy²) terms), so their rounding
# error is a few ulps of that scale, not of the gain; 1e-9 of the scale leaves a margin of
# ~10⁶ ulps while a wrong split differs by far more on problems of a few dozen rows.
RELATIVE_TOLERANCE = 1e-9

# The implementation Problem.run() calls; the fixture below runs every test on both.
SEARCH: list[Any] = [find_splits]


@pytest.fixture(params=["numpy", "compiled"], autouse=True)
def implementation(request: pytest.FixtureRequest) -> Any:
    search = find_splits if request.param == "numpy" else compiled_find_splits
    SEARCH[0] = search
    yield search
    SEARCH[0] = find_splits


@dataclass
class Problem:
    ctx: SplitContext
    rows: NDArray[np.intp]
    slot_of_row: NDArray[np.intp]
    features: NDArray[np.int64]
    parent_channels: NDArray[np.float64]
    parent_counts: NDArray[np.int64]
    targets: NDArray[np.float64] | None  # regression targets of every row of ctx.binned

    def run(self) -> Splits:
        return SEARCH[0](
            self.ctx,
            self.rows,
            self.slot_of_row,
            self.features,
            self.parent_channels,
            self.parent_counts,
        )

    def naive(self) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        return find_splits_naive(self.ctx, self.rows, self.slot_of_row, self.features)

    def node_rows(self, slot: int | np.integer[Any]) -> NDArray[np.intp]:
        rows: NDArray[np.intp] = self.rows[self.slot_of_row == slot]
        return rows


def make_problem(
    seed: int,
    criterion: str,
    n_classes: int = 2,
    *,
    missing: bool | None = None,
    categorical: bool | None = None,
    node_size: tuple[int, int] = (1, 30),
    n_slots: int | None = None,
    weight_kind: str | None = None,
) -> Problem:
    """A random batch of nodes; ``None`` options are drawn at random too."""
    rng = np.random.default_rng(seed)
    n_features = int(rng.integers(1, 6))
    if categorical is None:
        is_categorical = rng.random(n_features) < 0.35
    else:
        is_categorical = np.full(n_features, categorical) & (rng.random(n_features) < 0.7)
        is_categorical[0] = categorical
    n_bins = np.where(
        is_categorical, rng.integers(1, 9, n_features), rng.integers(1, 14, n_features)
    )
    n_slots = int(rng.integers(1, 7)) if n_slots is None else n_slots
    sizes = rng.integers(node_size[0], node_size[1] + 1, n_slots)
    n_total = int(sizes.sum()) + int(rng.integers(0, 10))  # some rows belong to no node

    binned = (rng.random((n_total, n_features)) * n_bins).astype(np.uint8)
    missing_rate = rng.choice([0.0, 0.1, 0.4]) if missing is None else (0.25 if missing else 0.0)
    has_missing_column = rng.random(n_features) < 0.7
    has_missing_column[0] |= bool(missing)
    binned[(rng.random(binned.shape) < missing_rate) & has_missing_column] = MISSING_BIN

    kind = rng.choice(["ones", "integers", "floats"])
    weight_kind = kind if weight_kind is None else weight_kind
    if weight_kind == "ones":
        weights = np.ones(n_total)
    elif weight_kind == "integers":
        weights = rng.integers(1, 5, n_total).astype(np.float64)
    else:
        weights = rng.uniform(0.05, 3.0, n_total)
    # A signal on the first feature so that good splits exist and win by a margin.
    signal = np.where(binned[:, 0] == MISSING_BIN, 3, binned[:, 0]).astype(np.float64)
    targets: NDArray[np.float64] | None = None
    classes: NDArray[np.int64] | None = None
    if criterion == "squared_error":
        targets = signal + rng.normal(scale=2.0, size=n_total)
        channels = np.column_stack([weights, weights * targets])
    else:
        noisy = signal + rng.normal(scale=2.0, size=n_total)
        classes = np.clip((noisy / 3.0).astype(np.int64), 0, n_classes - 1)
        flip = rng.random(n_total) < 0.2
        classes[flip] = rng.integers(0, n_classes, int(flip.sum()))
        channels = np.zeros((n_total, n_classes))
        channels[np.arange(n_total), classes] = weights

    # Rows of each node: a random subset of all rows, grouped by slot.
    order = rng.permutation(n_total)[: int(sizes.sum())]
    slot_of_row = np.repeat(np.arange(n_slots), sizes).astype(np.intp)
    rows = order.astype(np.intp)

    n_per_node = int(rng.integers(1, n_features + 1))
    features = np.full((n_slots, n_per_node), -1, dtype=np.int64)
    for slot in range(n_slots):
        k = int(rng.integers(1, n_per_node + 1))
        chosen = rng.choice(n_features, k, replace=False)
        positions = rng.choice(n_per_node, k, replace=False)  # padding anywhere, not only last
        features[slot, positions] = chosen

    parent_channels = np.zeros((n_slots, channels.shape[1]))
    np.add.at(parent_channels, slot_of_row, channels[rows])
    parent_counts = np.bincount(slot_of_row, minlength=n_slots).astype(np.int64)
    total_weight = float(weights[rows].sum())
    ctx = SplitContext(
        binned=binned,
        channels=channels,
        criterion=criterion,  # type: ignore[arg-type]
        is_categorical=is_categorical,
        bin_values=np.tile(np.arange(256, dtype=np.float64), (n_features, 1)),
        min_samples_leaf=int(rng.choice([1, 1, 1, 2, 3, 5])),
        min_weight_leaf=float(rng.choice([0.0, 0.0, 0.05, 0.15])) * total_weight / n_slots,
        n_bins=n_bins.astype(np.int32),
        classes=classes,
        weights=weights if classes is not None else None,
        has_missing=bool((binned == MISSING_BIN).any()),
    )
    return Problem(ctx, rows, slot_of_row, features, parent_channels, parent_counts, targets)


# --- first-principles gains ----------------------------------------------------------------


def row_weights(problem: Problem, rows: NDArray[np.intp]) -> NDArray[np.float64]:
    channels = problem.ctx.channels[rows]
    return channels[:, 0] if problem.ctx.criterion == "squared_error" else channels.sum(axis=1)


def weighted_impurity(problem: Problem, rows: NDArray[np.intp]) -> float:
    """W · impurity of a set of rows: gini and entropy from class proportions, variance
    from the targets themselves (no criterion code involved)."""
    if rows.size == 0:
        return 0.0
    if problem.ctx.criterion == "squared_error":
        assert problem.targets is not None
        w, y = row_weights(problem, rows), problem.targets[rows]
        mean = np.average(y, weights=w)
        return float(np.sum(w * (y - mean) ** 2))
    class_weight = problem.ctx.channels[rows].sum(axis=0)
    total = class_weight.sum()
    p = class_weight[class_weight > 0] / total
    if problem.ctx.criterion == "gini":
        return float(total * (1.0 - np.sum(p**2)))
    return float(total * -np.sum(p * np.log2(p)))


def gain_scale(problem: Problem, rows: NDArray[np.intp]) -> float:
    """Magnitude of the scores a node's gain is the difference of (see RELATIVE_TOLERANCE)."""
    w = row_weights(problem, rows)
    if problem.ctx.criterion == "squared_error":
        assert problem.targets is not None
        return float(np.sum(w * problem.targets[rows] ** 2) + w.sum())
    return float(w.sum() * max(1.0, np.log2(max(w.sum(), 1.0))))


def replay(
    problem: Problem, splits: Splits, slot: int | np.integer[Any]
) -> tuple[NDArray[np.bool_], float]:
    """Send the node's rows through ``left_codes``; return the left mask and the gain."""
    rows = problem.node_rows(slot)
    codes = problem.ctx.binned[rows, splits.feature[slot]]
    left = splits.left_codes[slot, codes]
    gain = (
        weighted_impurity(problem, rows)
        - weighted_impurity(problem, rows[left])
        - weighted_impurity(problem, rows[~left])
    )
    return left, gain


CASES = [
    ("gini", 2),
    ("gini", 3),
    ("gini", 5),
    ("entropy", 2),
    ("entropy", 4),
    ("squared_error", 0),
]
N_PROBLEMS = 120


def only_feature(problem: Problem, slot: int | np.integer[Any], feature: int) -> float:
    """The naive best gain of one node when only ``feature`` is a candidate."""
    rows = problem.node_rows(slot)
    gains, _ = find_splits_naive(
        problem.ctx, rows, np.zeros(rows.size, dtype=np.intp), np.array([[feature]])
    )
    return float(gains[0])


# --- naive vs vectorised -------------------------------------------------------------------


@pytest.mark.parametrize(("criterion", "n_classes"), CASES)
def test_vectorised_best_gain_equals_the_naive_reference(criterion: str, n_classes: int) -> None:
    unique_best_compared = 0
    for seed in range(N_PROBLEMS):
        problem = make_problem(seed, criterion, n_classes)
        splits = problem.run()
        naive_gain, naive_feature = problem.naive()
        np.testing.assert_array_equal(splits.found, np.isfinite(naive_gain), err_msg=f"{seed=}")
        for slot in np.flatnonzero(splits.found):
            tolerance = RELATIVE_TOLERANCE * gain_scale(problem, problem.node_rows(slot))
            expected = max(naive_gain[slot], 0.0)
            assert splits.gain[slot] == pytest.approx(expected, abs=tolerance), f"{seed=} {slot=}"
            per_feature = {
                int(f): only_feature(problem, slot, int(f))
                for f in problem.features[slot]
                if f >= 0
            }
            # The reported feature must itself reach the best gain (ties may pick another
            # feature than the reference, never a worse one) ...
            reached = per_feature[int(splits.feature[slot])]
            assert reached == pytest.approx(naive_gain[slot], abs=tolerance), f"{seed=} {slot=}"
            # ... and when no other candidate comes within tolerance it is the reference's.
            near_best = sum(gain >= naive_gain[slot] - tolerance for gain in per_feature.values())
            if near_best == 1:
                assert splits.feature[slot] == naive_feature[slot], f"{seed=} {slot=}"
                unique_best_compared += 1
        assert not np.any(splits.found & (splits.feature < 0))
        assert np.all(splits.feature[~splits.found] == -1)
        assert np.all(splits.gain[~splits.found] == 0.0)
    # The feature comparison must not be vacuous.
    assert unique_best_compared > N_PROBLEMS


@pytest.mark.parametrize(("criterion", "n_classes"), CASES)
def test_left_codes_reproduce_the_reported_gain(criterion: str, n_classes: int) -> None:
    seen: set[tuple[bool, bool]] = set()  # (categorical, missing_left) with missing rows
    for seed in range(N_PROBLEMS):
        problem = make_problem(seed, criterion, n_classes)
        splits = problem.run()
        ctx = problem.ctx
        for slot in np.flatnonzero(splits.found):
            rows = problem.node_rows(slot)
            feature = int(splits.feature[slot])
            left, gain = replay(problem, splits, slot)
            tolerance = RELATIVE_TOLERANCE * gain_scale(problem, rows)
            assert gain == pytest.approx(splits.gain[slot], abs=tolerance), f"{seed=} {slot=}"
            # The partition honours the leaf constraints the search was given.
            assert min(left.sum(), (~left).sum()) >= ctx.min_samples_leaf
            left_weight = row_weights(problem, rows[left]).sum()
            right_weight = row_weights(problem, rows[~left]).sum()
            assert min(left_weight, right_weight) > 0
            assert min(left_weight, right_weight) >= ctx.min_weight_leaf
            # One table encodes the threshold, the partition and the missing direction.
            assert splits.left_codes[slot, MISSING_BIN] == splits.missing_left[slot]
            categorical = bool(ctx.is_categorical[feature])
            if not categorical:
                expected = np.arange(MISSING_BIN) <= splits.bin[slot]
                np.testing.assert_array_equal(splits.left_codes[slot, :MISSING_BIN], expected)
            codes = ctx.binned[rows, feature]
            if (codes == MISSING_BIN).any():
                seen.add((categorical, bool(splits.missing_left[slot])))
    # Random problems must exercise numeric and categorical splits with missing rows sent
    # either way, or this test proves less than it claims.
    assert seen == {(False, False), (False, True), (True, False), (True, True)}, seen


@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("categorical", [False, True])
def test_agreement_with_and_without_missing_and_categories(
    missing: bool, categorical: bool
) -> None:
    for seed in range(60):
        for criterion, n_classes in (("gini", 3), ("squared_error", 0)):
            problem = make_problem(
                1000 + seed, criterion, n_classes, missing=missing, categorical=categorical
            )
            assert problem.ctx.has_missing == missing
            splits = problem.run()
            naive_gain, _ = problem.naive()
            np.testing.assert_array_equal(splits.found, np.isfinite(naive_gain))
            for slot in np.flatnonzero(splits.found):
                tolerance = RELATIVE_TOLERANCE * gain_scale(problem, problem.node_rows(slot))
                assert splits.gain[slot] == pytest.approx(max(naive_gain[slot], 0), abs=tolerance)
                _, gain = replay(problem, splits, slot)
                assert gain == pytest.approx(splits.gain[slot], abs=tolerance)


# --- dense and sort paths of the group table -------------------------------------------------


def run_with_threshold(
    problem: Problem, monkeypatch: pytest.MonkeyPatch, cells_per_row: float
) -> Splits:
    with monkeypatch.context() as patch:
        patch.setattr(_splitter, "DENSE_CELLS_PER_ROW", cells_per_row)
        return problem.run()


BATCH_SHAPES = pytest.mark.parametrize(
    ("node_size", "n_slots"),
    [((200, 400), 2), ((1, 6), 40)],
    ids=["few-large-nodes", "many-small-nodes"],
)
PATH_CASES = pytest.mark.parametrize(
    ("criterion", "n_classes"), [("gini", 3), ("entropy", 2), ("squared_error", 0)]
)


def assert_same_splits(problem: Problem, monkeypatch: pytest.MonkeyPatch, label: str) -> None:
    default = problem.run()
    sort = run_with_threshold(problem, monkeypatch, 0)  # n_cells <= 0 never holds
    dense = run_with_threshold(problem, monkeypatch, 10**12)  # always holds
    for field in fields(Splits):
        for other, name in ((sort, "sort"), (default, "default")):
            np.testing.assert_array_equal(
                getattr(dense, field.name),
                getattr(other, field.name),
                err_msg=f"{label} dense vs {name}: {field.name}",
            )


@BATCH_SHAPES
@PATH_CASES
@pytest.mark.parametrize("weight_kind", ["ones", "integers", "floats"])
def test_dense_and_sort_paths_give_identical_splits(
    monkeypatch: pytest.MonkeyPatch,
    node_size: tuple[int, int],
    n_slots: int,
    criterion: str,
    n_classes: int,
    weight_kind: str,
) -> None:
    # Bit-identical, fractional weights included: both paths must add each group's rows in
    # the same order, or a node's split would depend on which other nodes share its batch
    # (near-ties resolving differently). Fixed in 7a98604 (reduceat summed pairwise).
    for seed in range(20):
        problem = make_problem(
            seed,
            criterion,
            n_classes,
            node_size=node_size,
            n_slots=n_slots,
            weight_kind=weight_kind,
        )
        assert_same_splits(problem, monkeypatch, f"{seed=}")


# --- hand-made nodes -------------------------------------------------------------------------


def single_node(
    binned: list[list[int]],
    targets: list[float],
    *,
    categorical: list[bool],
    criterion: str = "squared_error",
    min_samples_leaf: int = 1,
) -> Problem:
    codes = np.asarray(binned, dtype=np.uint8)
    y = np.asarray(targets, dtype=np.float64)
    n = y.size
    if criterion == "squared_error":
        channels = np.column_stack([np.ones(n), y])
        target_values: NDArray[np.float64] | None = y
    else:
        channels = np.zeros((n, int(y.max()) + 1))
        channels[np.arange(n), y.astype(np.int64)] = 1.0
        target_values = None
    ctx = SplitContext(
        binned=codes,
        channels=channels,
        criterion=criterion,  # type: ignore[arg-type]
        is_categorical=np.asarray(categorical),
        bin_values=np.tile(np.arange(256, dtype=np.float64), (codes.shape[1], 1)),
        min_samples_leaf=min_samples_leaf,
    )
    return Problem(
        ctx,
        np.arange(n, dtype=np.intp),
        np.zeros(n, dtype=np.intp),
        np.arange(codes.shape[1], dtype=np.int64)[None, :],
        channels.sum(axis=0)[None, :],
        np.array([n]),
        target_values,
    )


def test_categorical_split_finds_a_non_contiguous_partition() -> None:
    # Categories 0 and 2 have mean +5, 1 and 3 mean −5: no threshold on the codes separates
    # them, the target-ordered partition {0, 2} | {1, 3} does, removing all variance.
    codes = [0, 1, 2, 3] * 3
    y = [5.0 if c in (0, 2) else -5.0 for c in codes]
    problem = single_node([[c] for c in codes], y, categorical=[True])
    splits = problem.run()
    assert splits.found[0] and splits.gain[0] == pytest.approx(12 * 25.0)
    left = {c for c in range(4) if splits.left_codes[0, c]}
    assert left in ({0, 2}, {1, 3})
    # The same codes read as numbers cannot do better than a quarter of that.
    numeric = single_node([[c] for c in codes], y, categorical=[False]).run()
    assert numeric.gain[0] == pytest.approx(100.0)


def test_missing_rows_alone_can_be_split_off() -> None:
    # Present rows all share one bin: the only split separates them from the missing rows,
    # which must therefore go right (left = the present bin).
    problem = single_node(
        [[4], [4], [4], [255], [255]], [1, 1, 1, 0, 0], categorical=[False], criterion="gini"
    )
    splits = problem.run()
    assert splits.found[0] and not splits.missing_left[0]
    assert splits.left_codes[0, 4] and not splits.left_codes[0, MISSING_BIN]
    assert splits.gain[0] == pytest.approx(5 * (1 - 0.6**2 - 0.4**2))


def test_no_split_when_constant_or_leaves_would_be_too_small() -> None:
    constant = single_node([[3]] * 4, [0, 1, 0, 1], categorical=[False], criterion="gini")
    assert not constant.run().found[0]
    assert not np.isfinite(constant.naive()[0][0])
    small = single_node(
        [[0], [1], [2], [3]],
        [0, 0, 1, 1],
        categorical=[False],
        criterion="gini",
        min_samples_leaf=3,
    )
    splits = small.run()
    assert not splits.found[0] and splits.feature[0] == -1 and splits.gain[0] == 0.0
    allowed = single_node(
        [[0], [1], [2], [3]],
        [0, 0, 1, 1],
        categorical=[False],
        criterion="gini",
        min_samples_leaf=2,
    )
    assert allowed.run().gain[0] == pytest.approx(2.0)  # 4·½ impurity removed entirely


def test_without_missing_rows_unseen_missing_values_follow_the_heavier_child() -> None:
    # Three rows go left of the best cut, one right; with no missing row in the node the
    # missing direction is the heavier (left) child.
    problem = single_node([[0], [0], [0], [5]], [0, 0, 0, 1], categorical=[False], criterion="gini")
    splits = problem.run()
    assert splits.found[0] and splits.missing_left[0] and splits.left_codes[0, MISSING_BIN]
    problem = single_node([[0], [5], [5], [5]], [0, 1, 1, 1], categorical=[False], criterion="gini")
    assert not problem.run().missing_left[0]
