"""What a batch process hands its worker: the output dataset, written and ready to be named.

It crosses the process's pipe (pickled there, as every worker message is; never stored), so it
holds the output's description only: the parts' names, sizes and digests, the columns' kinds
and summaries, the metrics and the notes; never its rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from service.datasets.columns import ColumnSummary
from service.datasets.parts import WrittenPart
from service.db.tables import ColumnKind


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """A scored dataset whose parts are in the store; the rows are the worker's to commit."""

    dataset_id: str
    name: str
    n_rows: int
    parts: Sequence[WrittenPart]
    kinds: Sequence[tuple[str, ColumnKind]]
    summaries: Sequence[ColumnSummary]
    size_bytes: int
    sha256: str
    metrics: dict[str, Any] | None
    notes: list[str]


@dataclass(frozen=True, slots=True)
class Scored:
    """The batch finished and its output's parts are in the data store."""

    outcome: BatchOutcome
