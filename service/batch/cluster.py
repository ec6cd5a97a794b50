"""A batch prediction scored on the Dask cluster: each worker reads, scores and writes parts.

With ``COPPICE_DASK_SCHEDULER`` set, the batch process is the Dask client: it sends one task
per input part (:class:`PartToScore`: where the part and the model's artifact lie in the
store, and what the output holds) and never opens an input part itself. A worker reads the
part's columns (verified, as every read of the store is), loads the model once per batch
(:func:`score_part`), scores the rows with the same ``score`` the batch process uses when it
scores alone, and writes the output as one part whose number and row offset are the input
part's, so the output's rows are in the input's order whichever worker finishes first, and a
task Dask runs again after a lost worker rewrites the same object with the same bytes.

What comes back is small: the written part's name, size and digest, the unseen categories'
counts, and, when the dataset holds the model's target, the few numbers a row the metrics
need (target, prediction, class probabilities), as the batch process keeps them when it
scores alone. The output's column summaries are then taken by the batch process from the
written parts, a row group at a time (:func:`service.batch.process.summarise`).

Failures that no retry can mend (an infinite value, a corrupt part or artifact, a changed
registered table) come back as a :class:`PartFailure` value rather than as the exception:
service errors take arguments that Dask's pickling of an exception does not carry.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from service.batch.errors import BatchFailed, Interrupted
from service.batch.scoring import InfiniteValue, TargetScore, Unseen, score, target_values
from service.datasets.part_reader import DatasetChanged, open_part
from service.datasets.parts import PartWriter, WrittenPart, dataset_prefix, layout
from service.db.tables import DatasetPartRecord
from service.models.cache import LoadedModel
from service.models.service import ArtifactCorrupt, load_described
from service.store import DataStore, ObjectCorrupt, StoredObject, StoreUnavailable

__all__ = ["PartFailure", "PartScored", "PartToScore", "forget_models", "score_on_cluster"]

# How often the batch process looks at its tasks (for progress, and to obey a stop).
POLL_SECONDS = 0.05
# Every row group of an input part's output goes into one output part.
_ONE_PART = 1 << 30


@dataclass(frozen=True)
class PartToScore:
    """One input part and everything a worker needs to score it (picklable, no session)."""

    store_url: str
    store_options: dict[str, Any]
    index: int
    row_offset: int
    n_rows: int
    path: str
    size: int
    sha256: str | None
    source_stamp: str | None
    columns: tuple[str, ...]
    kinds: dict[str, str]
    keep: tuple[str, ...]
    return_proba: bool
    explain: bool
    with_target: bool
    model: LoadedModel  # the record's fields; the estimator (None) is loaded on the worker
    artifact: StoredObject
    output_id: str

    def record(self) -> DatasetPartRecord:
        return DatasetPartRecord(
            dataset_id="",
            part=self.index,
            row_offset=self.row_offset,
            n_rows=self.n_rows,
            path=self.path,
            size=self.size,
            sha256=self.sha256,
            source_stamp=self.source_stamp,
        )


@dataclass(frozen=True)
class PartFailure:
    """Why a part cannot be scored, however often it is tried (``BatchFailed``'s code)."""

    code: str
    message: str
    # The store could not be reached: worth another attempt of the whole batch.
    transient: bool = False


@dataclass(frozen=True)
class PartScored:
    """A scored part: its output part, and what the batch's notes and metrics need."""

    written: list[WrittenPart]
    schema: pa.Schema
    unseen: dict[str, int]
    # (target values, unknown labels, predicted, probabilities) when the target was scored.
    target: tuple[npt.NDArray[Any], int, npt.NDArray[Any], npt.NDArray[np.float64] | None] | None


# --- on a worker ---------------------------------------------------------------------------

# The batch's model, loaded by the first of its tasks a worker runs and kept for the others
# (a forest's artifact can be GiBs); ``forget_models`` drops it when the batch ends.
_models: dict[tuple[str, str | None], LoadedModel] = {}
_models_lock = threading.Lock()


def _model_on_worker(store: DataStore, task: PartToScore) -> LoadedModel:
    key = (task.model.id, task.artifact.sha256)
    with _models_lock:
        model = _models.get(key)
        if model is None:
            _models.clear()
            model = load_described(store, task.model, task.artifact)
            _models[key] = model
        return model


def forget_models() -> None:
    """On a worker: drop the batch's model (the batch process runs it when it ends)."""
    with _models_lock:
        _models.clear()


def score_part(task: PartToScore) -> PartScored | PartFailure:
    """On a worker: read, score and write one input part (see the module's docstring)."""
    store = DataStore(task.store_url, task.store_options)
    try:
        model = _model_on_worker(store, task)
        table = open_part(store, task.record()).read(columns=list(task.columns))
        unseen = Unseen()
        scored = score(
            model,
            table,
            task.kinds,
            task.keep,
            return_proba=task.return_proba,
            explain=task.explain,
            first_row=task.row_offset,
            unseen=unseen,
            with_proba=task.with_target,
        )
        target = None
        if task.with_target:
            known = target_values(model, task.kinds[model.target], table.column(model.target))
            if known is not None:
                target = (*known, scored.predicted, scored.proba)
        del table
        # The row groups' size from the output's columns alone, so every worker's part of
        # one output has the same.
        group_rows, _ = layout(8.0 * scored.batch.num_columns)
        writer = PartWriter(
            store,
            task.output_id,
            scored.batch.schema,
            row_group_rows=group_rows,
            groups_per_part=_ONE_PART,
            first_index=task.index,
            first_row=task.row_offset,
        )
        try:
            writer.write(scored.batch)
            written = writer.finish()
        except BaseException:
            writer.abort()
            raise
        return PartScored(written, scored.batch.schema, dict(unseen.counts), target)
    except InfiniteValue as error:
        return PartFailure("invalid_value", str(error))
    except ObjectCorrupt as error:
        return PartFailure("dataset_corrupt", error.detail)
    except DatasetChanged as error:
        return PartFailure("dataset_changed", error.detail)
    except ArtifactCorrupt as error:
        return PartFailure("artifact_corrupt", error.detail)
    except StoreUnavailable as error:
        return PartFailure("store_unavailable", error.detail, transient=True)


# --- in the batch process ----------------------------------------------------------------


def score_on_cluster(
    client: Any,
    store: DataStore,
    tasks: Sequence[PartToScore],
    on_scored: Callable[[int], None],
    should_stop: Callable[[], bool],
) -> list[PartScored]:
    """Every part scored, in the tasks' order; ``on_scored`` hears each part's rows as it is
    done. Raises ``Interrupted`` on a stop and ``BatchFailed`` for a part that cannot be
    scored; then, as on any error, the tasks are cancelled and the output's parts written so
    far are deleted (a task still running may write one more, which no row will ever name:
    ``coppice store gc`` sweeps it)."""
    futures = client.map(score_part, tasks, pure=False)
    rows = {future.key: task.n_rows for future, task in zip(futures, tasks, strict=True)}
    try:
        pending = list(futures)
        while pending:
            if should_stop():
                raise Interrupted
            done = [future for future in pending if future.done()]
            if not done:
                time.sleep(POLL_SECONDS)
                continue
            pending = [future for future in pending if future not in done]
            for future in done:
                if future.status == "error":
                    future.result()  # raises the worker's error here
                on_scored(rows[future.key])
        answers: list[PartScored | PartFailure] = client.gather(futures)
        scored: list[PartScored] = []
        for answer in answers:
            if isinstance(answer, PartFailure):
                if answer.transient:
                    raise StoreUnavailable(answer.message)
                raise BatchFailed(answer.code, answer.message)
            scored.append(answer)
        return scored
    except BaseException:
        client.cancel(futures)
        if tasks:
            # Best effort: what is left, store gc sweeps.
            with contextlib.suppress(Exception):
                store.delete_prefix(dataset_prefix(tasks[0].output_id))
        raise
    finally:
        # The workers may be gone, and their models with them.
        with contextlib.suppress(Exception):
            client.run(forget_models)


def add_targets(target: TargetScore, answers: Sequence[PartScored]) -> None:
    """The parts' target values and predictions into the batch's metrics, in part order."""
    for answer in answers:
        if answer.target is not None:
            target.add_values(*answer.target)
