"""``coppice predict``: a CSV file in, a CSV of predictions out, a batch of rows at a time.

The file is read row by row and sent in batches, so a file of any length works within the
server's per-request row limit and without holding the file in memory. Cells are typed as
the model's features were at training: numbers for numeric features (the server takes no
numbers as text), the text itself for categorical ones.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any, TextIO

from coppice.client import Client
from coppice.errors import APIError
from coppice.models import Model

# The server's missing-value spellings (docs/api.md, "Values and column kinds").
MISSING = frozenset({"", "NA", "N/A", "NaN", "nan", "null", "NULL"})


def _numeric(text: str) -> Any:
    text = text.strip()
    if text in MISSING:
        return None
    try:
        return float(text)
    except ValueError:
        return text  # the server answers 422 naming the row and feature


def _categorical(text: str) -> Any:
    text = text.strip()
    return None if text in MISSING else text


def _batches(reader: Iterator[list[str]], size: int) -> Iterator[list[list[str]]]:
    while batch := list(islice(reader, size)):
        yield batch


def predict_csv(
    client: Client,
    ref: str,
    path: Path,
    out: TextIO,
    *,
    proba: bool,
    batch_size: int,
    as_json: bool = False,
) -> int:
    """Write one output row per input row (a CSV row, or with ``as_json`` a JSON object per
    line with the same names); returns the number of rows predicted."""
    model = client.model(ref)
    kinds = {feature["name"]: feature["kind"] for feature in model.info["features"]}
    with path.open(newline="", encoding="utf-8-sig") as file:
        reader = csv.reader(file)
        header = next(reader, None)
        if header is None:
            raise ValueError(f"{path} is empty: a CSV file with a header row is needed")
        keep = [j for j, name in enumerate(header) if name != model.target]
        if len(keep) < len(header):
            print(f"note: leaving out the target column {model.target!r}", file=sys.stderr)
        columns = [header[j] for j in keep]
        convert = [_numeric if kinds.get(name) == "numeric" else _categorical for name in columns]
        classes = model.classes if proba and model.task == "classification" else None
        names = ["prediction", *(f"proba_{c}" for c in classes or [])]
        writer: _JsonLines | Any = _JsonLines(out, names)
        if not as_json:
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(names)
        done = 0
        for batch in _batches(reader, batch_size):
            for number, row in enumerate(batch, start=done + 1):
                if len(row) != len(header):
                    raise ValueError(
                        f"row {number} of {path} has {len(row)} cells; the header has {len(header)}"
                    )
            rows = [[f(row[j]) for f, j in zip(convert, keep, strict=True)] for row in batch]
            written = _predict_batch(model, columns, rows, classes, done)
            writer.writerows(written)
            done += len(batch)
    return done


class _JsonLines:
    """``csv.writer``'s ``writerows``, writing each row as a JSON object on its own line."""

    def __init__(self, out: TextIO, names: list[str]) -> None:
        self._out = out
        self._names = names

    def writerows(self, rows: list[list[Any]]) -> None:
        for row in rows:
            self._out.write(json.dumps(dict(zip(self._names, row, strict=True))) + "\n")


def _predict_batch(
    model: Model,
    columns: list[str],
    rows: list[list[Any]],
    classes: list[str] | None,
    done: int,
) -> list[list[Any]]:
    records = [dict(zip(columns, row, strict=True)) for row in rows]
    try:
        if classes is None:
            return [[value] for value in model.predict(records)]
        probabilities = model.predict_proba(records)
        labels = [classes[j] for j in probabilities.argmax(axis=1)]
        return [[label, *p] for label, p in zip(labels, probabilities.tolist(), strict=True)]
    except APIError as error:
        # The server counts rows within this batch; say where the batch is in the file.
        error.args = (f"rows {done + 1}-{done + len(rows)} of the file: {error.detail}",)
        raise
