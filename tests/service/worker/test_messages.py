"""The messages between a worker and its fit process cross a pipe: they pickle, and stay put."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from worker_standins import Outcome

from service.store import StoredObject
from service.worker.messages import (
    Crashed,
    Errored,
    Failed,
    Lost,
    Progress,
    ShutDown,
    Stopped,
    StoredOutcome,
    Succeeded,
)

OUTCOME = Outcome(
    artifact=b"bytes",
    sha256="0" * 64,
    size=5,
    features=[{"name": "x", "kind": "numeric"}],
    classes=None,
    encoding={},
    resolved_params={},
    metrics={},
    curves=None,
)
MESSAGES = [
    Progress(0.25, "tree 1/4"),
    # The artifact's bytes stay in the data store: only its name crosses the pipe.
    Succeeded(StoredOutcome.of(OUTCOME, "m", StoredObject("models/m/model.cpm", 5, "0" * 64))),
    Failed("invalid_params", "max_depth must be positive"),
    Stopped(),
    Errored("training raised ValueError"),
    Crashed(),
    ShutDown(),
    Lost(),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_message_survives_the_pipe(message: object) -> None:
    assert pickle.loads(pickle.dumps(message)) == message


@pytest.mark.parametrize("message", MESSAGES[:3], ids=lambda m: type(m).__name__)
def test_a_message_cannot_change_on_its_way(message: object) -> None:
    field = dataclasses.fields(message)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(message, field, None)
