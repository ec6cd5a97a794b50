"""Each node's own random draws, from a key its path from the root gives it.

An extremely randomised tree draws, at each node, the order of its candidate features and one
threshold per candidate (Geurts, Ernst and Wehenkel 2006). Drawn from one sequential stream,
those draws depend on the order the nodes are grown in: a level-wise grower and a depth-first
one would grow different trees from the same seed. Here a node's draws are a function of the
node alone, as counter-based generators make them (Salmon et al. 2011, "Parallel random
numbers: as easy as 1, 2, 3"): the root's key is drawn once from the tree's stream, each
child's key is its parent's mixed with its side, and the node's ``i``-th uniform is the
SplitMix64 output (Steele, Lea and Flood 2014) of its key's draw stream at ``i``. So the level
loop (:mod:`engine.tree.grow.random_levels`), the depth-first finish of its small nodes
(:mod:`engine.tree.grow.subtree_kernels`) and the level loop on rows held elsewhere
(:mod:`engine.tree.grow.remote_forest`) grow the same tree, whatever order each visits its
nodes in.

Uniform ``2p`` places the threshold of the node's ``p``-th candidate; uniform ``2p + 1`` is the
Fisher–Yates step that draws the ``p``-th candidate (:func:`engine.tree.grow.level_kernels.
shuffle_rows`) when a node draws ``max_features`` of its pool at a time.

The compiled helpers here and their NumPy forms compute the same 64-bit integers (both wrap
around), so the kernels and their twins draw the same numbers.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from engine._kernels import inline_kernel

__all__ = ["child_keys", "key_uniforms", "root_key", "shuffle_draw", "threshold_draw"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_RIGHT = np.uint64(0x3C6EF372FE94F82A)  # 2 · _GOLDEN, wrapped
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)
_DRAWS = np.uint64(0xD1B54A32D192ED03)  # a node's draw stream: its key xor this, mixed
_S11 = np.uint64(11)
_S27 = np.uint64(27)
_S30 = np.uint64(30)
_S31 = np.uint64(31)
_ONE = np.uint64(1)
_UNIT = 1.0 / 9007199254740992.0  # 2⁻⁵³: 53 random bits make a uniform in [0, 1)


def root_key(rng: np.random.Generator) -> np.uint64:
    """The root's key: one draw from the tree's stream."""
    return np.uint64(rng.integers(0, 2**64, dtype=np.uint64))


def threshold_draw(position: int) -> int:
    """The index of the uniform that places the threshold of a node's ``position``-th
    candidate."""
    return 2 * position


def shuffle_draw(position: int) -> int:
    """The index of the uniform of the Fisher–Yates step that draws a node's ``position``-th
    candidate."""
    return 2 * position + 1


# -- compiled ------------------------------------------------------------------------------


@inline_kernel
def _mix(z: np.uint64) -> np.uint64:
    z = (z ^ (z >> _S30)) * _MIX_1
    z = (z ^ (z >> _S27)) * _MIX_2
    return z ^ (z >> _S31)


@inline_kernel
def _child_key(key: np.uint64, right: bool) -> np.uint64:
    return _mix(key + (_RIGHT if right else _GOLDEN))


@inline_kernel
def _draw_key(key: np.uint64) -> np.uint64:
    return _mix(key ^ _DRAWS)


@inline_kernel
def _uniform(draw_key: np.uint64, index: int) -> float:
    z = _mix(draw_key + (np.uint64(index) + _ONE) * _GOLDEN)
    return np.float64(z >> _S11) * _UNIT


# -- NumPy ----------------------------------------------------------------------------------


def _mix_numpy(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    z = (z ^ (z >> _S30)) * _MIX_1
    z = (z ^ (z >> _S27)) * _MIX_2
    return z ^ (z >> _S31)


def child_keys(keys: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """The children's keys of nodes with ``keys``: left then right of each, in order."""
    keys = np.asarray(keys, dtype=np.uint64)
    children = np.empty((keys.size, 2), dtype=np.uint64)
    children[:, 0] = _mix_numpy(keys + _GOLDEN)
    children[:, 1] = _mix_numpy(keys + _RIGHT)
    return children.ravel()


def key_uniforms(keys: NDArray[np.uint64], indices: NDArray[np.int64]) -> NDArray[np.float64]:
    """Uniform ``indices[j]`` of the node of ``keys[k]`` at ``[k, j]``."""
    keys = np.asarray(keys, dtype=np.uint64)
    draw_keys = _mix_numpy(keys ^ _DRAWS)
    steps = (np.asarray(indices, dtype=np.uint64) + _ONE) * _GOLDEN
    z = _mix_numpy(draw_keys[:, None] + steps[None, :])
    return (z >> _S11).astype(np.float64) * _UNIT
