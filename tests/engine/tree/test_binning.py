"""BinMapper: exact bins for few values, quantile bins for many, one code for missing values,
and thresholds that mean exactly what the bins mean."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from engine import DecisionTreeClassifier
from engine.tree._binning import MISSING_BIN, BinMapper


def fit_numeric(column: np.ndarray, max_bins: int = 255) -> BinMapper:
    return BinMapper(max_bins).fit(column.reshape(-1, 1), np.array([False]))


def fit_categorical(column: np.ndarray, max_bins: int = 255) -> BinMapper:
    return BinMapper(max_bins).fit(column.reshape(-1, 1), np.array([True]))


def test_few_distinct_values_get_a_bin_each_with_midpoint_thresholds() -> None:
    rng = np.random.default_rng(0)
    distinct = np.sort(rng.choice(np.arange(-500, 500) * 0.37, size=40, replace=False))
    column = rng.permutation(np.repeat(distinct, rng.integers(1, 6, distinct.size)))
    mapper = fit_numeric(column, max_bins=40)  # exactly max_bins values still count as "few"
    assert mapper.n_bins_[0] == 40
    np.testing.assert_array_equal(mapper.thresholds_[0, :39], (distinct[:-1] + distinct[1:]) / 2)
    assert np.all(np.isinf(mapper.thresholds_[0, 39:]))
    codes = mapper.transform(column.reshape(-1, 1))[:, 0]
    np.testing.assert_array_equal(codes, np.searchsorted(distinct, column))
    np.testing.assert_array_equal(mapper.bin_values_[0, :40], distinct)


def test_many_values_get_quantile_bins_of_nearly_equal_size() -> None:
    rng = np.random.default_rng(1)
    n, max_bins = 10_000, 32
    column = rng.lognormal(size=n)  # skewed: equal-width bins would be very unequal
    mapper = fit_numeric(column, max_bins=max_bins)
    assert mapper.n_bins_[0] == max_bins
    counts = np.bincount(mapper.transform(column.reshape(-1, 1))[:, 0], minlength=max_bins)
    # The values are distinct and each edge is the midpoint between the two order statistics
    # around quantile q, so each bin holds n/max_bins = 312.5 rows up to the rounding of the
    # quantile ranks: at most one row either side of each edge.
    assert counts.sum() == n
    assert np.abs(counts - n / max_bins).max() <= 2
    # Bins are ordered in value: every value of bin b is below every value of bin b+1.
    codes = mapper.transform(column.reshape(-1, 1))[:, 0]
    highs = np.array([column[codes == b].max() for b in range(max_bins)])
    lows = np.array([column[codes == b].min() for b in range(max_bins)])
    assert np.all(highs[:-1] < lows[1:])


def test_heavy_ties_never_split_one_value_across_bins() -> None:
    rng = np.random.default_rng(2)
    column = np.concatenate([np.zeros(5000), rng.normal(size=5000)])  # half the rows are 0
    mapper = fit_numeric(column, max_bins=16)
    codes = mapper.transform(column.reshape(-1, 1))[:, 0]
    assert np.unique(codes[column == 0]).size == 1
    assert mapper.n_bins_[0] <= 16


def test_nan_goes_to_the_missing_bin_at_fit_and_at_transform() -> None:
    column = np.array([1.0, np.nan, 2.0, 3.0, np.nan])
    mapper = fit_numeric(column)
    assert mapper.n_bins_[0] == 3  # NaN does not take a value bin
    codes = mapper.transform(np.array([[np.nan], [1.0], [2.5], [-7.0], [99.0]]))[:, 0]
    np.testing.assert_array_equal(codes, [MISSING_BIN, 0, 1, 0, 2])  # 2.5 is an edge: x <= edge
    assert mapper.transform(column.reshape(-1, 1)).dtype == np.uint8
    all_missing = fit_numeric(np.array([np.nan, np.nan]))
    np.testing.assert_array_equal(
        all_missing.transform(np.array([[np.nan], [1.0]]))[:, 0], [255, 0]
    )


def test_adjacent_floats_keep_separate_bins() -> None:
    # The midpoint of two adjacent doubles rounds onto one of them; the lower value must
    # then serve as the edge, or the upper value would share the lower one's bin.
    low = 1.0
    high = np.nextafter(low, 2.0)
    mapper = fit_numeric(np.array([low, high, low, high]))
    codes = mapper.transform(np.array([[low], [high]]))[:, 0]
    np.testing.assert_array_equal(codes, [0, 1])
    assert low <= mapper.thresholds_[0, 0] < high


finite_floats = st.floats(-1e6, 1e6, allow_nan=False, width=64)
columns = hnp.arrays(
    np.float64,
    st.integers(1, 600),
    elements=st.one_of(finite_floats, st.sampled_from([0.0, 1.0, 1.5, -2.0, np.nan])),
)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(column=columns, max_bins=st.sampled_from([2, 3, 7, 64, 255]), probe=finite_floats)
def test_threshold_b_holds_exactly_the_values_of_bins_up_to_b(
    column: np.ndarray, max_bins: int, probe: float
) -> None:
    mapper = fit_numeric(column, max_bins=max_bins)
    values = np.append(column, probe)
    codes = mapper.transform(values.reshape(-1, 1))[:, 0].astype(np.int64)
    present = ~np.isnan(values)
    np.testing.assert_array_equal(codes[~present], MISSING_BIN)
    assert codes[present].max(initial=0) < mapper.n_bins_[0] <= max_bins
    # "bin ≤ b" ⇔ "x ≤ thresholds_[b]" for every bin boundary and every value, training
    # values as well as an unseen probe: trees store only the thresholds.
    thresholds = mapper.thresholds_[0]
    for b in range(MISSING_BIN):  # past the last edge thresholds are +inf: all values
        np.testing.assert_array_equal(
            codes[present] <= b, values[present] <= thresholds[b], err_msg=f"bin {b}"
        )
    # Distinct training values share a bin only when the quantiles forced it.
    distinct = np.unique(column[~np.isnan(column)])
    if distinct.size <= max_bins:
        assert np.unique(mapper.transform(distinct.reshape(-1, 1))).size == distinct.size


def test_categories_map_to_consecutive_codes_and_unknowns_to_missing() -> None:
    column = np.array([7.0, 2.0, 2.0, 11.0, np.nan, 7.0, 0.0])
    mapper = fit_categorical(column)
    assert mapper.n_bins_[0] == 4
    np.testing.assert_array_equal(mapper.categories_[0, :4], [0, 2, 7, 11])
    codes = mapper.transform(column.reshape(-1, 1))[:, 0]
    np.testing.assert_array_equal(codes, [2, 1, 1, 3, MISSING_BIN, 2, 0])
    # Unseen, negative, fractional (also just below a known code) and huge codes.
    unseen = np.array([[3.0], [-1.0], [np.nan], [12.0], [2.5], [1.5], [10.9], [1e9], [11.0]])
    np.testing.assert_array_equal(mapper.transform(unseen)[:, 0], [255] * 8 + [3])
    encoded = mapper.encode_for_prediction(unseen)[:, 0]
    assert np.isnan(encoded[:8]).all() and encoded[8] == 3.0


def test_exactly_255_categories_are_accepted() -> None:
    column = np.arange(255, dtype=np.float64) * 2
    mapper = fit_categorical(column)
    np.testing.assert_array_equal(mapper.transform(column.reshape(-1, 1))[:, 0], np.arange(255))


@pytest.mark.parametrize(
    ("column", "message"),
    [
        (np.arange(256, dtype=np.float64), "256 categories"),
        (np.array([0.0, 1.0, 2.5]), "non-negative integer codes"),
        (np.array([0.0, -1.0, 2.0]), "non-negative integer codes"),
    ],
    ids=["too-many", "fractional", "negative"],
)
def test_bad_categorical_columns_are_clear_errors(column: np.ndarray, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fit_categorical(column)
    # The estimators surface the same error, naming the feature.
    X = np.column_stack([np.zeros_like(column), column])
    y = np.arange(column.size) % 2
    with pytest.raises(ValueError, match="feature 1"):
        DecisionTreeClassifier(categorical_features=[1]).fit(X, y)


def test_fewer_bins_than_categories_is_an_error_not_a_silent_merge() -> None:
    with pytest.raises(ValueError, match="at most 4"):
        fit_categorical(np.arange(5, dtype=np.float64), max_bins=4)


@pytest.mark.parametrize("max_bins", [1, 256])
def test_max_bins_outside_2_255_is_refused(max_bins: int) -> None:
    with pytest.raises(ValueError, match="max_bins"):
        BinMapper(max_bins)


def test_subsampled_quantiles_are_reproducible_and_close_to_the_full_ones() -> None:
    rng = np.random.default_rng(3)
    column = rng.normal(size=(20_000, 1))
    a = BinMapper(16, subsample=5000, seed=7).fit(column, np.array([False]))
    b = BinMapper(16, subsample=5000, seed=7).fit(column, np.array([False]))
    np.testing.assert_array_equal(a.thresholds_, b.thresholds_)
    counts = np.bincount(a.transform(column)[:, 0], minlength=16) / column.shape[0]
    # Quantiles of 5000 draws: each bin's true mass 1/16 has a standard error of about
    # sqrt(p(1-p)/5000) ≈ 0.0034, so ±0.015 (over 4 sd) holds for every one of the bins.
    assert np.abs(counts - 1 / 16).max() < 0.015


@pytest.mark.parametrize("exact", [False, True])
@pytest.mark.parametrize("n_rows", [500, 5_000])
def test_fit_from_the_sampled_rows_learns_the_edges_fit_learns(n_rows: int, exact: bool) -> None:
    # The parts-and-partitions contract: gather X[sample_rows(n)] from wherever the rows lie,
    # fit_sample on them, and bin each piece with transform; the mapper and the codes are those
    # of fit and transform on the whole matrix.
    rng = np.random.default_rng(7)
    X = np.column_stack(
        [
            rng.normal(size=n_rows),
            rng.integers(0, 5, n_rows).astype(float),
            np.round(rng.lognormal(size=n_rows), 1),
        ]
    )
    X[rng.random(X.shape) < 0.1] = np.nan
    categorical = np.array([False, True, False])
    whole = BinMapper(32, subsample=1_000, seed=3, exact=exact).fit(X, categorical)
    mapper = BinMapper(32, subsample=1_000, seed=3, exact=exact)
    rows = mapper.sample_rows(n_rows)
    assert mapper.subsamples(n_rows) == (n_rows > 1_000 and not exact)
    assert rows.size == (1_000 if mapper.subsamples(n_rows) else n_rows)
    assert np.all(np.diff(rows) > 0)
    mapper.fit_sample(X[rows], categorical)
    for name in ("n_bins_", "thresholds_", "bin_values_", "categories_", "is_categorical_"):
        np.testing.assert_array_equal(getattr(mapper, name), getattr(whole, name))
    pieces = np.concatenate([mapper.transform(X[i : i + 700]) for i in range(0, n_rows, 700)])
    np.testing.assert_array_equal(pieces, whole.transform(X))
