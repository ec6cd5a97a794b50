"""DependenceTreeCombiner: Chow–Liu trees and the tree-factored posterior, against hand
computations (Kuncheva §4.6)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from engine.fusion import DependenceTreeCombiner, chow_liu_tree


def brute_force_maximum_spanning_tree(weights: list[list[float]]) -> set[frozenset[int]]:
    """Try every set of L − 1 edges; keep the heaviest one that connects all nodes."""
    n = len(weights)
    edges = list(itertools.combinations(range(n), 2))
    best: tuple[float, set[frozenset[int]]] = (-math.inf, set())

    def find(component: list[int], a: int) -> int:
        while component[a] != a:
            a = component[a]
        return a

    for chosen in itertools.combinations(edges, n - 1):
        component = list(range(n))
        for a, b in chosen:
            component[find(component, a)] = find(component, b)
        if len({find(component, a) for a in range(n)}) != 1:
            continue
        total = sum(weights[a][b] for a, b in chosen)
        if total > best[0]:
            best = (total, {frozenset(edge) for edge in chosen})
    return best[1]


def tree_edges(parents: np.ndarray) -> set[frozenset[int]]:
    return {
        frozenset((int(child), int(parent))) for child, parent in enumerate(parents) if parent >= 0
    }


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n_nodes", [2, 4, 6])
def test_chow_liu_is_the_maximum_spanning_tree(seed: int, n_nodes: int) -> None:
    rng = np.random.default_rng(seed)
    weights = rng.uniform(size=(n_nodes, n_nodes))
    weights = (weights + weights.T) / 2
    np.fill_diagonal(weights, 0.0)
    parents = chow_liu_tree(weights)
    assert parents[0] == -1 and (parents[1:] >= 0).all()
    assert tree_edges(parents) == brute_force_maximum_spanning_tree(weights.tolist())


def hand_mutual_information(pairs: list[tuple[int, int]]) -> float:
    """I(A; B) in nats from a list of observed (a, b), by the definition."""
    n = len(pairs)
    joint: dict[tuple[int, int], int] = {}
    for pair in pairs:
        joint[pair] = joint.get(pair, 0) + 1
    left = {a: sum(c for (x, _), c in joint.items() if x == a) for a, _ in joint}
    right = {b: sum(c for (_, y), c in joint.items() if y == b) for _, b in joint}
    return sum(
        c / n * math.log((c / n) / ((left[a] / n) * (right[b] / n))) for (a, b), c in joint.items()
    )


def make_labels(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Four members of varied quality and dependence on two classes, 60 rows."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=60)
    first = np.where(rng.uniform(size=60) < 0.8, y, 1 - y)
    copyish = np.where(rng.uniform(size=60) < 0.9, first, 1 - first)
    second = np.where(rng.uniform(size=60) < 0.7, y, 1 - y)
    noise = rng.integers(0, 2, size=60)
    return np.column_stack([first, copyish, second, noise]), y


@pytest.mark.parametrize("structure", ["per_class", "shared"])
def test_trees_are_maximum_spanning_trees_of_hand_mutual_information(
    echo_members: Callable[..., Any], structure: str
) -> None:
    S, y = make_labels(0)
    model = DependenceTreeCombiner(echo_members(4, S, y), structure=structure, prefit=True)
    model.fit(S, y)
    prior = [float(np.mean(y == k)) for k in range(2)]
    hand = [
        [
            [
                hand_mutual_information([(int(a), int(b)) for a, b in S[y == k][:, [i, j]]])
                if i != j
                else 0.0
                for j in range(4)
            ]
            for i in range(4)
        ]
        for k in range(2)
    ]
    # Summation order differs from the vectorised one: agreement to rounding.
    np.testing.assert_allclose(model.mutual_information_, hand, rtol=1e-12, atol=1e-15)
    for k in range(2):
        weights = hand[k]
        if structure == "shared":
            weights = [
                [prior[0] * hand[0][i][j] + prior[1] * hand[1][i][j] for j in range(4)]
                for i in range(4)
            ]
        off_diagonal = [weights[i][j] for i, j in itertools.combinations(range(4), 2)]
        assert len(set(off_diagonal)) == len(off_diagonal)  # a unique maximum tree
        assert tree_edges(model.parents_[k]) == brute_force_maximum_spanning_tree(weights)


def hand_posterior(
    S: np.ndarray, y: np.ndarray, parents: list[int], query: list[int], alpha: Fraction
) -> list[Fraction]:
    """P(ω_k) ∏ P(s_i | s_parent, ω_k) with (n(a, b) + α)/(n(b) + c·α), counted row by row."""
    rows = [(list(map(int, s)), int(label)) for s, label in zip(S, y, strict=True)]
    scores = []
    for k in range(2):
        in_class = [s for s, label in rows if label == k]
        score = Fraction(len(in_class), len(rows))
        for i, parent in enumerate(parents):
            if parent < 0:
                hits = sum(1 for s in in_class if s[i] == query[i])
                score *= (hits + alpha) / (len(in_class) + 2 * alpha)
            else:
                given = [s for s in in_class if s[parent] == query[parent]]
                hits = sum(1 for s in given if s[i] == query[i])
                score *= (hits + alpha) / (len(given) + 2 * alpha)
        scores.append(score)
    return [score / sum(scores) for score in scores]


def test_posterior_follows_the_tree_factorisation(echo_members: Callable[..., Any]) -> None:
    """With one shared tree, the posterior of every possible label vector equals the
    product over the tree's edges, counted by hand in exact arithmetic."""
    S, y = make_labels(1)
    model = DependenceTreeCombiner(echo_members(4, S, y), structure="shared", prefit=True)
    model.fit(S, y)
    parents = model.parents_[0].tolist()
    queries = np.array(list(itertools.product([0, 1], repeat=4)))
    expected = [hand_posterior(S, y, parents, list(q), Fraction(1, 2)) for q in queries]
    # Sixteen products of five smoothed fractions in float64: a few ulps.
    np.testing.assert_allclose(model.predict_proba(queries), np.array(expected, float), atol=1e-14)


def test_per_class_trees_use_each_class_tree(echo_members: Callable[..., Any]) -> None:
    S, y = make_labels(2)
    model = DependenceTreeCombiner(echo_members(4, S, y), alpha=1.0, prefit=True).fit(S, y)
    assert tree_edges(model.parents_[0]) != tree_edges(model.parents_[1])  # a real test
    queries = np.array(list(itertools.product([0, 1], repeat=4)))
    for query, proba in zip(queries, model.predict_proba(queries), strict=True):
        # Class k's score uses class k's own tree: P(ω_k) ∏ P(s_i | s_parent_k(i), ω_k).
        direct = []
        for k in range(2):
            in_class = S[y == k]
            score = Fraction(len(in_class), len(S))
            for i, parent in enumerate(model.parents_[k].tolist()):
                pool = in_class if parent < 0 else in_class[in_class[:, parent] == query[parent]]
                hits = int((pool[:, i] == query[i]).sum())
                score *= Fraction(hits + 1, len(pool) + 2)
            direct.append(score)
        np.testing.assert_allclose(proba, [float(d / sum(direct)) for d in direct], atol=1e-14)


def test_a_duplicated_member_is_not_counted_twice(echo_members: Callable[..., Any]) -> None:
    """Naive Bayes multiplies a copied member's evidence twice; the tree hangs the copy
    under its original, where P(copy | original) is nearly one, so the evidence counts once."""
    from engine.fusion import NaiveBayesCombiner

    S, y = make_labels(3)
    doubled = np.column_stack([S[:, [0, 2]], S[:, 0]])
    tree = DependenceTreeCombiner(echo_members(3, doubled, y), prefit=True).fit(doubled, y)
    assert frozenset((0, 2)) in tree_edges(tree.parents_[0])
    single = NaiveBayesCombiner(echo_members(2, S[:, [0, 2]], y), prefit=True).fit(S[:, [0, 2]], y)
    twice = NaiveBayesCombiner(echo_members(3, doubled, y), prefit=True).fit(doubled, y)
    queries = np.array([[1, 0, 1], [0, 1, 0]])
    gap_tree = np.abs(tree.predict_proba(queries) - single.predict_proba(queries[:, :2])).max()
    gap_twice = np.abs(twice.predict_proba(queries) - single.predict_proba(queries[:, :2])).max()
    # Measured: 0.04 against 0.25; what remains of the gap is the tree's modelling of the
    # dependence between the two distinct members, which the single naive Bayes ignores.
    assert gap_tree < 0.1 and gap_twice > 0.2
