"""From spaces to concrete configurations, and successive halving's schedule.

Grid takes every combination (in the order written) up to ``max_models``. Random draws
``max_models`` points, taking the candidate entries in turn so each method gets its share, and
never draws the same point twice (a small finite space simply runs out). Successive halving
(Jamieson & Talwalkar 2016; the "rows" resource of Li et al. 2017's Hyperband brackets) starts
the random configurations on a share of the rows and keeps the best third for three times as
many rows, until the last rung trains on all of them; the winner comes from the last rung.
"""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from service.searches import spaces
from service.searches.schemas import Strategy

DEFAULT_RANDOM_MODELS = 20
# Draws tried for a point not yet chosen before an entry's space counts as used up.
MAX_REDRAWS = 50
# Halving keeps 1/FACTOR of a rung and gives the survivors FACTOR times the rows
# (scikit-learn's HalvingRandomSearchCV default).
FACTOR = 3


@dataclass(frozen=True, slots=True)
class Config:
    """One configuration to train: a method, its concrete params, and its entry's index."""

    method: str
    params: dict[str, Any]
    entry: int


def configurations(
    entries: list[tuple[str, spaces.Space]],
    strategy: Strategy,
    max_models: int | None,
    rng: np.random.Generator,
) -> list[Config]:
    """The configurations of a search, in the order they are queued."""
    if strategy == Strategy.GRID:
        points = (
            Config(method, point, index)
            for index, (method, space) in enumerate(entries)
            for point in spaces.grid(space)
        )
        # Lazily: a grid far larger than max_models is cut without being enumerated.
        return list(itertools.islice(points, max_models))
    wanted = max_models or DEFAULT_RANDOM_MODELS
    chosen: list[Config] = []
    seen: set[str] = set()
    exhausted: set[int] = set()
    turn = 0
    while len(chosen) < wanted and len(exhausted) < len(entries):
        index = turn % len(entries)
        turn += 1
        if index in exhausted:
            continue
        method, space = entries[index]
        point = _new_point(space, rng, seen, method)
        if point is None:
            exhausted.add(index)
            continue
        chosen.append(Config(method, point, index))
    return chosen


def _new_point(
    space: spaces.Space, rng: np.random.Generator, seen: set[str], method: str
) -> dict[str, Any] | None:
    for _ in range(MAX_REDRAWS):
        point = spaces.draw(space, rng)
        key = json.dumps([method, point], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            return point
    return None


@dataclass(frozen=True, slots=True)
class Rung:
    candidates: int  # configurations trained on this rung (at most)
    rows: int  # rows each trains on


def halving_rungs(n_configs: int, n_rows: int, min_rows: int) -> list[Rung]:
    """The rungs: as many as both the configurations and the rows allow, the last on all rows.

    Like scikit-learn's schedule, the number of rungs is the smaller of
    ``1 + ⌊log_3(configurations)⌋`` and ``1 + ⌊log_3(rows / min_rows)⌋``.
    """
    by_configs = math.floor(math.log(max(n_configs, 1), FACTOR) + 1e-9)
    by_rows = math.floor(math.log(max(n_rows / max(min_rows, 1), 1.0), FACTOR) + 1e-9)
    n_rungs = 1 + max(0, min(by_configs, by_rows))
    return [
        Rung(
            candidates=math.ceil(n_configs / FACTOR**i),
            rows=n_rows // FACTOR ** (n_rungs - 1 - i),
        )
        for i in range(n_rungs)
    ]


def survivors(n_finished: int) -> int:
    """How many of a rung's finished candidates go on to the next rung."""
    return max(1, math.ceil(n_finished / FACTOR))
