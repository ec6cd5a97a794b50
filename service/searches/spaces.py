"""Parameter spaces: what a search may choose for each parameter, and drawing from them.

A parameter's value in a request is a list (choose one), ``{"int": [lo, hi]}``,
``{"uniform": [lo, hi]}``, ``{"log_uniform": [lo, hi]}`` (both ends included), or any other
value, which is fixed. Random search draws every parameter independently, which finds good
settings with far fewer trials than a grid when only a few parameters matter (Bergstra &
Bengio 2012); a grid takes every combination of the lists.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

RANGE_KINDS = ("int", "uniform", "log_uniform")


class SpaceError(ValueError):
    """A parameter's space is malformed; ``name`` is the parameter."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name = name
        self.message = message


@dataclass(frozen=True, slots=True)
class Choice:
    values: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Range:
    kind: str  # one of RANGE_KINDS
    low: float
    high: float


@dataclass(frozen=True, slots=True)
class Fixed:
    value: Any


Dimension = Choice | Range | Fixed
Space = dict[str, Dimension]


def parse(params: Mapping[str, Any]) -> Space:
    """The space of a candidate's ``params``; ``SpaceError`` naming the first bad one."""
    return {name: _dimension(name, value) for name, value in params.items()}


def _dimension(name: str, value: Any) -> Dimension:
    if isinstance(value, list):
        if not value:
            raise SpaceError(name, f"'{name}' is an empty list; give at least one value.")
        return Choice(tuple(value))
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in RANGE_KINDS:
        kind, bounds = next(iter(value.items()))
        return _range(name, kind, bounds)
    return Fixed(value)


def _range(name: str, kind: str, bounds: Any) -> Range:
    numbers = (
        isinstance(bounds, list)
        and len(bounds) == 2
        and all(isinstance(b, int | float) and not isinstance(b, bool) for b in bounds)
    )
    if not numbers or not all(math.isfinite(b) for b in bounds):
        raise SpaceError(name, f"'{name}': {{'{kind}': [lo, hi]}} needs two finite numbers.")
    low, high = float(bounds[0]), float(bounds[1])
    if low > high:
        raise SpaceError(name, f"'{name}': the range's low end {low:g} is above its high end.")
    if kind == "int" and not all(float(b).is_integer() for b in bounds):
        raise SpaceError(name, f"'{name}': an 'int' range needs whole numbers.")
    if kind == "log_uniform" and low <= 0:
        raise SpaceError(name, f"'{name}': a 'log_uniform' range needs a low end above 0.")
    return Range(kind, low, high)


def extremes(dimension: Dimension) -> list[Any]:
    """Values that check a dimension against a method's schema: every choice, a range's ends."""
    if isinstance(dimension, Choice):
        return list(dimension.values)
    if isinstance(dimension, Range):
        ends = [dimension.low, dimension.high]
        return [int(end) for end in ends] if dimension.kind == "int" else ends
    return [dimension.value]


def grid_size(space: Space) -> int | None:
    """How many points a grid over ``space`` has; None when a range makes it infinite."""
    if any(isinstance(d, Range) for d in space.values()):
        return None
    return math.prod(len(d.values) for d in space.values() if isinstance(d, Choice))


def grid(space: Space) -> Iterator[dict[str, Any]]:
    """Every combination of the lists, in the order written (the last parameter fastest)."""
    names = list(space)
    axes = [
        d.values if isinstance(d, Choice) else (d.value,)  # type: ignore[union-attr]
        for d in space.values()
    ]
    for values in itertools.product(*axes):
        yield dict(zip(names, values, strict=True))


def draw(space: Space, rng: np.random.Generator) -> dict[str, Any]:
    """One point, each parameter drawn independently (ranges: uniform in value or in log)."""
    point: dict[str, Any] = {}
    for name, dimension in space.items():
        if isinstance(dimension, Fixed):
            point[name] = dimension.value
        elif isinstance(dimension, Choice):
            point[name] = dimension.values[int(rng.integers(len(dimension.values)))]
        elif dimension.kind == "int":
            point[name] = int(rng.integers(int(dimension.low), int(dimension.high) + 1))
        elif dimension.kind == "uniform":
            point[name] = float(rng.uniform(dimension.low, dimension.high))
        else:
            low, high = math.log(dimension.low), math.log(dimension.high)
            point[name] = float(math.exp(rng.uniform(low, high)))
    return point
