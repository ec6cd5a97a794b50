"""SVDCombiner: correspondence analysis against a direct SVD and against known answers
(Merz's method, Kuncheva §4.7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from engine.fusion import SVDCombiner


def random_labels(seed: int, n: int = 80, n_members: int = 3, n_classes: int = 3) -> Any:
    """Members right 60–80 % of the time, otherwise a random class."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_classes, size=n)
    columns = []
    for accuracy in np.linspace(0.6, 0.8, n_members):
        noise = rng.integers(0, n_classes, size=n)
        columns.append(np.where(rng.uniform(size=n) < accuracy, y, noise))
    return np.column_stack(columns), y


def direct_correspondence_analysis(S: np.ndarray, y: np.ndarray, n_classes: int) -> Any:
    """The textbook route: SVD of the N × (L+1)c standardised residuals, written out anew."""
    n, n_members = S.shape
    M = np.zeros((n, (n_members + 1) * n_classes))
    for row in range(n):
        for member in range(n_members):
            M[row, member * n_classes + S[row, member]] = 1.0
        M[row, n_members * n_classes + y[row]] = 1.0
    P = M / M.sum()
    r, c = P.sum(axis=1), P.sum(axis=0)
    residuals = (P - np.outer(r, c)) / np.sqrt(np.outer(r, c))
    _, sigma, Vt = np.linalg.svd(residuals, full_matrices=False)
    keep = sigma > 1e-8
    standard = Vt[keep].T / np.sqrt(c)[:, None]
    templates = standard[n_members * n_classes :] * sigma[keep]
    chi2_over_n = float((residuals**2).sum())  # Pearson χ² of M divided by its total
    return sigma[keep], standard, templates, chi2_over_n


@pytest.mark.parametrize("seed", range(3))
def test_matches_a_direct_svd_of_the_residuals(echo_members: Callable[..., Any], seed: int) -> None:
    S, y = random_labels(seed)
    model = SVDCombiner(echo_members(3, S, y), prefit=True).fit(S, y)
    sigma, standard, templates, chi2_over_n = direct_correspondence_analysis(S, y, 3)
    # Two routes to the same decomposition (eigh of SᵀS vs SVD of S): rounding-level
    # agreement; the squared route loses about half the digits of the smallest σ.
    np.testing.assert_allclose(model.singular_values_, sigma, rtol=1e-9)
    # Total inertia of a correspondence analysis is χ²/N (a known identity).
    np.testing.assert_allclose((model.singular_values_**2).sum(), chi2_over_n, rtol=1e-9)
    np.testing.assert_allclose(model.explained_inertia_.sum(), 1.0, rtol=1e-12)
    # Singular vectors are unique up to sign: align each dimension, then compare.
    signs = np.sign((model.column_coordinates_ * standard).sum(axis=0))
    np.testing.assert_allclose(model.column_coordinates_ * signs, standard, atol=1e-8)
    np.testing.assert_allclose(model.class_templates_ * signs, templates, atol=1e-8)
    # Supplementary projection: the mean of the members' standard column coordinates.
    queries = np.array([[0, 1, 2], [2, 2, 0], [1, 1, 1]])
    points = np.stack([standard[np.arange(3) * 3 + q].mean(axis=0) for q in queries])
    distances = ((points[:, None, :] - templates[None]) ** 2).sum(axis=2)
    expected = np.exp(-distances) / np.exp(-distances).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model.predict_proba(queries), expected, atol=1e-8)
    np.testing.assert_array_equal(model.predict(queries), distances.argmin(axis=1))


def test_perfect_members_give_unit_singular_values(echo_members: Callable[..., Any]) -> None:
    """Members always right make M block-diagonal up to a permutation: a perfect
    correspondence, whose c − 1 principal inertias are all exactly 1."""
    y = np.repeat([0, 1, 2], [5, 7, 9])
    S = np.column_stack([y, y])
    model = SVDCombiner(echo_members(2, S, y), prefit=True).fit(S, y)
    np.testing.assert_allclose(model.singular_values_, [1.0, 1.0], rtol=1e-12)
    np.testing.assert_array_equal(model.predict(np.array([[0, 0], [1, 1], [2, 2]])), [0, 1, 2])


def test_learns_to_invert_a_member_that_is_always_wrong(echo_members: Callable[..., Any]) -> None:
    """A member that always says the other class: its column "says 1" has the profile of the
    column "true class 0", so correspondence analysis puts them at the same point (the
    principle of distributional equivalence) and the combiner reads it backwards."""
    y = np.array([0, 1] * 6 + [1, 1])
    S = (1 - y)[:, None]
    model = SVDCombiner(echo_members(1, S, y), prefit=True).fit(S, y)
    says_one, true_zero = model.column_coordinates_[1], model.column_coordinates_[2]
    np.testing.assert_allclose(says_one, true_zero, atol=1e-12)
    np.testing.assert_array_equal(model.predict(np.array([[1], [0]])), [0, 1])


def test_n_components(echo_members: Callable[..., Any]) -> None:
    S, y = random_labels(4)
    full = SVDCombiner(echo_members(3, S, y), prefit=True).fit(S, y)
    assert full.n_components_ == 8  # (L + 1)(c − 1): each block of c columns has c − 1
    one = SVDCombiner(echo_members(3, S, y), n_components=1, prefit=True).fit(S, y)
    assert one.n_components_ == 1 and one.class_templates_.shape == (3, 1)
    np.testing.assert_allclose(one.singular_values_, full.singular_values_[:1], rtol=1e-12)
    share = float(full.explained_inertia_[:2].sum())
    two = SVDCombiner(echo_members(3, S, y), n_components=share - 1e-9, prefit=True).fit(S, y)
    assert two.n_components_ == 2


def test_class_without_weight_gets_no_template(echo_members: Callable[..., Any]) -> None:
    S, y = random_labels(5)
    weights = np.where(y == 2, 0.0, 1.0)
    model = SVDCombiner(echo_members(3, S, y), prefit=True).fit(S, y, sample_weight=weights)
    np.testing.assert_array_equal(model.class_seen_, [True, True, False])
    assert (model.predict_proba(S)[:, 2] == 0).all()
