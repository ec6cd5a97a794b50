"""The worker's checks around a batch's end: the output's parts are there before any row names
them (``service.worker.queue.finish_scored`` commits the rows), and an output nobody will name
is deleted (best effort: ``coppice store gc`` sweeps what this misses)."""

from __future__ import annotations

from service.batch.outcome import BatchOutcome
from service.datasets.parts import dataset_prefix
from service.models.artifacts import delete_objects
from service.store import DataStore


class OutputMismatch(Exception):
    """A part of the output is missing from the store, or not the size it was written at."""


def check_parts(store: DataStore, outcome: BatchOutcome) -> None:
    """Every part is in the store at the size it was written (one listing, no reads)."""
    listed = {info.path: info.size for info in store.walk(dataset_prefix(outcome.dataset_id))}
    for part in outcome.parts:
        size = listed.get(part.stored.path)
        if size != part.stored.size:
            found = "missing" if size is None else f"{size} bytes"
            raise OutputMismatch(
                f"output part '{part.stored.path}' is {found}; {part.stored.size} were written"
            )


def forget(store: DataStore, outcome: BatchOutcome) -> None:
    """Delete an output no row will name."""
    delete_objects(store, [part.stored.path for part in outcome.parts])
