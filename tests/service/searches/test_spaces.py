"""Parameter spaces, configurations and the halving schedule: pure functions, no database."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.searches import planner, spaces
from service.searches.schemas import Strategy


def test_each_kind_of_value_parses() -> None:
    space = spaces.parse(
        {
            "a": [1, 2],
            "b": {"int": [3, 10]},
            "c": {"uniform": [0.1, 0.9]},
            "d": {"log_uniform": [0.01, 1]},
            "e": "sqrt",
            "f": {"not": "a range"},
            "g": [[1, 2]],
        }
    )
    assert space["a"] == spaces.Choice((1, 2))
    assert space["b"] == spaces.Range("int", 3, 10)
    assert isinstance(space["d"], spaces.Range) and space["d"].kind == "log_uniform"
    assert space["e"] == spaces.Fixed("sqrt")
    assert space["f"] == spaces.Fixed({"not": "a range"})  # a dict value stays a value
    assert space["g"] == spaces.Choice(([1, 2],))  # a list value is written as [[...]]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ([], "empty list"),
        ({"int": [1]}, "two finite numbers"),
        ({"uniform": [2, 1]}, "above its high end"),
        ({"int": [1.5, 3]}, "whole numbers"),
        ({"log_uniform": [0, 1]}, "above 0"),
        ({"uniform": [0, float("inf")]}, "finite"),
    ],
)
def test_malformed_spaces_name_the_parameter(value: object, words: str) -> None:
    with pytest.raises(spaces.SpaceError) as caught:
        spaces.parse({"max_depth": value})
    assert caught.value.name == "max_depth" and words in caught.value.message


def test_draws_stay_in_their_ranges_and_log_uniform_is_uniform_in_log() -> None:
    space = spaces.parse(
        {"n": {"int": [3, 5]}, "u": {"uniform": [0.2, 0.4]}, "l": {"log_uniform": [1e-3, 1e1]}}
    )
    rng = np.random.default_rng(0)
    points = [spaces.draw(space, rng) for _ in range(2000)]
    assert {p["n"] for p in points} == {3, 4, 5}
    assert all(0.2 <= p["u"] <= 0.4 for p in points)
    logs = np.log10([p["l"] for p in points])
    assert logs.min() >= -3 and logs.max() <= 1
    # Half the draws below the middle of the log range (10^-1), as uniform in log puts them.
    assert abs(np.mean(logs < -1) - 0.5) < 0.05


def test_grid_is_every_combination_in_order_and_max_models_truncates() -> None:
    entries = [
        ("random_forest", spaces.parse({"a": [1, 2], "b": ["x", "y"], "c": 0})),
        ("xgboost", spaces.parse({"d": [7]})),
    ]
    rng = np.random.default_rng(0)
    configs = planner.configurations(entries, Strategy.GRID, None, rng)
    assert [c.params for c in configs[:4]] == [
        {"a": 1, "b": "x", "c": 0},
        {"a": 1, "b": "y", "c": 0},
        {"a": 2, "b": "x", "c": 0},
        {"a": 2, "b": "y", "c": 0},
    ]
    assert configs[4] == planner.Config("xgboost", {"d": 7}, 1)
    assert len(planner.configurations(entries, Strategy.GRID, 3, rng)) == 3


def test_random_takes_entries_in_turn_without_repeating_a_point() -> None:
    entries = [
        ("random_forest", spaces.parse({"a": [1, 2]})),  # two points only
        ("xgboost", spaces.parse({"lr": {"log_uniform": [0.01, 0.3]}})),
    ]
    configs = planner.configurations(entries, Strategy.RANDOM, 8, np.random.default_rng(1))
    forests = [c.params["a"] for c in configs if c.method == "random_forest"]
    assert sorted(forests) == [1, 2]  # the small space runs out; the other fills the budget
    assert len(configs) == 8
    assert configs[0].method == "random_forest" and configs[1].method == "xgboost"


def test_halving_rungs_end_on_every_row_and_keep_a_third() -> None:
    rungs = planner.halving_rungs(27, 9000, 50)
    assert [(r.candidates, r.rows) for r in rungs] == [
        (27, 9000 // 27),
        (9, 9000 // 9),
        (3, 9000 // 3),
        (1, 9000),
    ]
    # Too few rows for four rungs: as many as the rows allow.
    assert len(planner.halving_rungs(27, 500, 50)) == 1 + math.floor(math.log(10, 3))
    assert planner.halving_rungs(1, 500, 50) == [planner.Rung(1, 500)]
    assert planner.survivors(10) == 4 and planner.survivors(1) == 1
