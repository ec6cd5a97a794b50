"""Boosted trees packed once per output for prediction, shared by the boosting families.

Stage-major ``estimators_[m][k]`` (stage m, output k) is packed into one ``PackedTrees`` per
output, built at the end of ``fit`` (so predicting never changes the fitted model's state),
dropped at the start of a refit, and never persisted: packing costs far more than
predicting one row.
"""

from __future__ import annotations

from typing import ClassVar

from engine.tree._tree import Tree
from engine.tree.predict.packing import PackedTrees

__all__ = ["PackedStagesMixin"]


class PackedStagesMixin:
    _persistence_exclude: ClassVar[tuple[str, ...]] = ("_packed_cache",)

    estimators_: list[list[Tree]]

    def _packed(self) -> list[PackedTrees]:
        """One packed forest per output, in output order."""
        cached: list[PackedTrees] | None = self.__dict__.get("_packed_cache")
        if cached is None:
            n_outputs = len(self.estimators_[0]) if self.estimators_ else 0
            cached = [
                PackedTrees([stage[k] for stage in self.estimators_]) for k in range(n_outputs)
            ]
            self.__dict__["_packed_cache"] = cached
        return cached

    def _forget_packed(self) -> None:
        self.__dict__.pop("_packed_cache", None)
