"""BinMapper's Numba kernels against their NumPy twins (bit for bit), and fit's quantiles
against ``np.percentile``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from engine._kernels import compiled_kernels
from engine.tree import _binning_kernels as kernels
from engine.tree._binning import BinMapper, midpoint_quantiles


def random_tables(
    rng: np.random.Generator, n_features: int, width: int = 255
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Edge and category tables laid out as BinMapper lays them out (+inf / NaN padding)."""
    is_categorical = rng.random(n_features) < 0.3
    edges = np.full((n_features, width), np.inf)
    n_edges = np.zeros(n_features, np.intp)
    categories = np.full((n_features, 255), np.nan)
    n_categories = np.zeros(n_features, np.intp)
    for f in range(n_features):
        if is_categorical[f]:
            known = np.unique(rng.choice(300, int(rng.integers(0, 256)), replace=False))
            known = known[:255].astype(float)
            categories[f, : known.size] = known
            n_categories[f] = known.size
        else:
            n = int(rng.choice([0, 1, 2, 3, 17, 128, width]))
            found = np.unique(np.round(rng.normal(size=n) * 3, 1))
            if n and f % 4 == 0:
                found[0] = -np.inf
            edges[f, : found.size] = found
            n_edges[f] = found.size
    return edges, n_edges, categories, n_categories, is_categorical


def random_values(rng: np.random.Generator, n_rows: int, n_features: int) -> np.ndarray:
    """Values on and between edges and categories, NaN, ±inf, −0.0 and far-away numbers."""
    X = np.round(rng.normal(size=(n_rows, n_features)) * 3, 1)
    codes = rng.random(X.shape) < 0.3
    X[codes] = rng.integers(-5, 305, int(codes.sum()))
    specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, 1e300, -1e300, 2.5, 254.0])
    pick = rng.random(X.shape) < 0.15
    X[pick] = rng.choice(specials, int(pick.sum()))
    return X


def both_codes(
    X: np.ndarray, tables: tuple[np.ndarray, ...], dtype: type, missing: int
) -> tuple[np.ndarray, np.ndarray]:
    compiled = np.empty(X.shape, dtype)
    twin = np.empty(X.shape, dtype)
    kernels.bin_codes_compiled(X, *tables[:4], tables[4], missing, compiled)
    kernels.bin_codes_numpy(X, *tables[:4], tables[4], missing, twin)
    return compiled, twin


@pytest.mark.parametrize("seed", range(6))
def test_bin_codes_kernel_equals_twin(seed: int) -> None:
    rng = np.random.default_rng(seed)
    tables = random_tables(rng, 12)
    for n_rows in (0, 1, 2000):
        X = random_values(rng, n_rows, 12)
        compiled, twin = both_codes(X, tables, np.uint8, 255)
        np.testing.assert_array_equal(compiled, twin)
    assert (twin == 255).any() and (twin < 255).any()


def test_wide_edge_tables_use_uint16_codes() -> None:
    # Exact binning beyond 255 bins: tables wider than 255, the kernel's generic search.
    rng = np.random.default_rng(7)
    tables = random_tables(rng, 5, width=1000)
    edges, n_edges = tables[0], tables[1]
    edges[1, :1000] = np.arange(1000.0)
    n_edges[1] = 1000
    X = random_values(rng, 3000, 5)
    X[:, 1] = rng.uniform(-10, 1010, 3000)
    compiled, twin = both_codes(X, tables, np.uint16, 65535)
    np.testing.assert_array_equal(compiled, twin)
    assert twin[:, 1].max() > 255


def test_bin_mapper_codes_are_the_twins_codes() -> None:
    rng = np.random.default_rng(8)
    X = rng.normal(size=(5000, 6))
    X[:, 2] = rng.integers(0, 25, 5000)
    X[rng.random(X.shape) < 0.1] = np.nan
    mapper = BinMapper(max_bins=31).fit(X, np.array([False, False, True, False, False, False]))
    X_new = np.concatenate([X, random_values(rng, 500, 6)])
    codes = mapper.transform(X_new)
    twin = np.empty_like(codes)
    n_bins = mapper.n_bins_.astype(np.intp)
    known = (~np.isnan(mapper.categories_)).sum(axis=1)
    kernels.bin_codes_numpy(
        X_new,
        mapper.thresholds_,
        np.where(mapper.is_categorical_, 0, n_bins - 1),
        mapper.categories_,
        np.where(mapper.is_categorical_, known, 0),
        mapper.is_categorical_,
        255,
        twin,
    )
    np.testing.assert_array_equal(codes, twin)


def test_tables_of_the_wrong_width_are_refused() -> None:
    tables = random_tables(np.random.default_rng(9), 3)
    with pytest.raises(ValueError, match="255 wide"):
        kernels.bin_codes_compiled(
            np.zeros((2, 3)), tables[0][:, :100], *tables[1:4], tables[4], 255,
            np.empty((2, 3), np.uint8),
        )  # fmt: skip


@pytest.mark.parametrize(("n_rows", "first", "stop"), [(0, 0, 7), (1, 0, 7), (999, 2, 5)])
def test_present_values_kernel_equals_twin(n_rows: int, first: int, stop: int) -> None:
    rng = np.random.default_rng(n_rows)
    X = rng.normal(size=(n_rows, 7))
    X[rng.random(X.shape) < 0.4] = np.nan
    X[:, 3] = np.nan  # a column with nothing present
    values, counts = kernels.present_values_compiled(X, first, stop)
    twin_values, twin_counts = kernels.present_values_numpy(X, first, stop)
    np.testing.assert_array_equal(counts, twin_counts)
    for f in range(stop - first):
        np.testing.assert_array_equal(values[f, : counts[f]], twin_values[f, : counts[f]])
        column = X[:, first + f]
        np.testing.assert_array_equal(values[f, : counts[f]], column[~np.isnan(column)])


def test_fit_reads_features_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(10)
    X = rng.normal(size=(300, 9))
    X[rng.random(X.shape) < 0.2] = np.nan
    whole = BinMapper(max_bins=16).fit(X, np.zeros(9, dtype=bool))
    monkeypatch.setattr("engine.tree._binning.PRESENT_BLOCK_VALUES", 300 * 2)  # 2 features
    blocked = BinMapper(max_bins=16).fit(X, np.zeros(9, dtype=bool))
    np.testing.assert_array_equal(whole.thresholds_, blocked.thresholds_)
    np.testing.assert_array_equal(whole.bin_values_, blocked.bin_values_)


# Sizes up to 300: Hypothesis draws arrays element by element, so 3,000 took 21 s of the suite;
# large arrays are held by the seeded test below instead.
samples = hnp.arrays(
    np.float64,
    st.integers(1, 300),
    elements=st.one_of(
        # + 0.0 turns a generated −0.0 into 0.0 (see the test below).
        st.floats(-1e300, 1e300, allow_nan=False, allow_subnormal=True).map(lambda v: v + 0.0),
        st.sampled_from([0.0, 1.0, 1.5, -2.0, np.inf, -np.inf, 5e-324]),
    ),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(values=samples, max_bins=st.sampled_from([2, 3, 7, 64, 255]))
def test_midpoint_quantiles_are_numpys_bits(values: np.ndarray, max_bins: int) -> None:
    quantiles = np.linspace(0, 100, max_bins + 1)[1:-1] / 100
    with np.errstate(invalid="ignore", over="ignore"):  # inf − inf, as np.percentile meets it
        expected = np.percentile(values, quantiles * 100, method="midpoint")
        found = midpoint_quantiles(np.sort(values), quantiles)
    # Bit for bit (NaN included); −0.0 is not generated, its placement among tied zeros
    # being the one thing a partition and a sort may order differently.
    np.testing.assert_array_equal(found.view(np.uint64), expected.view(np.uint64))


@pytest.mark.parametrize("n", [3_000, 100_003])
@pytest.mark.parametrize("max_bins", [2, 64, 255])
def test_midpoint_quantiles_of_large_samples_with_ties_are_numpys_bits(
    n: int, max_bins: int
) -> None:
    rng = np.random.default_rng(n + max_bins)
    values = np.concatenate(
        [rng.normal(size=n // 2), rng.integers(-5, 5, size=n - n // 2).astype(np.float64)]
    )
    values[rng.random(n) < 0.01] = np.inf
    quantiles = np.linspace(0, 100, max_bins + 1)[1:-1] / 100
    with np.errstate(invalid="ignore", over="ignore"):
        expected = np.percentile(values, quantiles * 100, method="midpoint")
        found = midpoint_quantiles(np.sort(values), quantiles)
    np.testing.assert_array_equal(found.view(np.uint64), expected.view(np.uint64))


def test_the_environment_selects_the_kernels() -> None:
    if compiled_kernels():
        assert kernels.bin_codes is kernels.bin_codes_compiled
        assert kernels.present_values is kernels.present_values_compiled
    else:
        assert kernels.bin_codes is kernels.bin_codes_numpy
        assert kernels.present_values is kernels.present_values_numpy
