"""Column distributions: a numeric column's histogram is NumPy's, a categorical column's top
categories are a Counter's, and both come back from ``GET /v1/datasets/{id}`` after a CSV or a
JSON upload, on SQLite and PostgreSQL, JSON-safe."""

from __future__ import annotations

import csv
import io
import json
import random
from collections import Counter
from itertools import pairwise
from typing import Any

import httpx
import numpy as np
import pytest

from service.datasets.columns import CategoricalColumn, NumericColumn, summarize
from service.datasets.distributions import (
    HISTOGRAM_BINS,
    TOP_CATEGORIES,
    bin_edges,
    count_distinct_sorted,
    histogram,
)

Cell = float | str | None


# --- the computation, against NumPy ------------------------------------------------------------


def _samples(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 3000))
    match seed % 5:
        case 0:
            return rng.normal(0, 1, n)
        case 1:  # integers 0..20: many values exactly on edges
            return rng.integers(0, 21, n).astype(np.float64)
        case 2:  # heavy ties, a wide range, both signs
            return rng.choice([-1e9, -3.5, 0.0, -0.0, 2.25, 7e12], n)
        case 3:  # a tiny span far from zero
            return 1e6 + rng.random(n) * 1e-6
        case _:
            return rng.lognormal(0, 3, n) * rng.choice([-1, 1], n)


@pytest.mark.parametrize("seed", range(40))
def test_histogram_equals_numpy(seed: int) -> None:
    values = _samples(seed)
    if values.min() == values.max():
        values[0] += 1.0
    counts, edges = np.histogram(values, bins=HISTOGRAM_BINS)

    found = histogram(np.sort(values))

    assert found["edges"] == edges.tolist()
    assert found["counts"] == counts.tolist()
    assert all(type(count) is int for count in found["counts"])
    assert count_distinct_sorted(np.sort(values)) == np.unique(values).size


@pytest.mark.parametrize("value", [5.0, -0.0, 1e20, -1.7e308, 5e-324])
def test_a_constant_column_is_one_bin_at_its_value(value: float) -> None:
    # NumPy spreads a constant over value ± 0.5, and refuses beyond about 1e16.
    assert histogram(np.full(7, value)) == {"edges": [value, value], "counts": [7]}
    assert count_distinct_sorted(np.full(7, value)) == 1


def test_no_values_is_an_empty_histogram() -> None:
    assert histogram(np.empty(0)) == {"edges": [], "counts": []}
    assert count_distinct_sorted(np.empty(0)) == 0


def _check_bins(values: np.ndarray, found: dict[str, list[Any]]) -> None:
    """Edges ascending and finite, from min to max; each value counted in its own bin."""
    edges, counts = np.array(found["edges"]), found["counts"]
    assert np.isfinite(edges).all() and (np.diff(edges) > 0).all()
    assert (edges[0], edges[-1]) == (values.min(), values.max())
    expected = [
        int(np.count_nonzero((values >= low) & ((values < high) | (i == len(counts) - 1))))
        for i, (low, high) in enumerate(pairwise(edges))
    ]
    assert counts == expected and sum(counts) == values.size


def test_a_span_beyond_float64_still_gets_its_bins() -> None:
    values = np.array([-1.7e308, 1.7e308, 0.0, 1e308, -5e307, 3.0])
    with pytest.raises(ValueError), np.errstate(all="ignore"):  # "Too many bins for data range"
        np.histogram(values, bins=HISTOGRAM_BINS)
    found = histogram(np.sort(values))
    assert len(found["counts"]) == HISTOGRAM_BINS
    _check_bins(values, found)


def test_values_a_few_ulps_apart_get_fewer_bins() -> None:
    low = 1e20
    values = np.array([low, np.nextafter(low, 2e20), np.nextafter(np.nextafter(low, 2e20), 2e20)])
    found = histogram(np.sort(values))
    assert 1 <= len(found["counts"]) < HISTOGRAM_BINS
    _check_bins(values, found)
    assert bin_edges(0.0, 1.0).tolist() == np.linspace(0.0, 1.0, HISTOGRAM_BINS + 1).tolist()


def test_summaries_carry_the_distribution() -> None:
    numeric = summarize(NumericColumn("n", np.array([1.0, np.nan, 3.0, 3.0])))
    categorical = summarize(
        CategoricalColumn("c", np.array([0, 1, 1, -1, 2, 1], dtype=np.int32), ("a", "b", "c"))
    )
    counts, edges = np.histogram([1.0, 3.0, 3.0], bins=HISTOGRAM_BINS)
    assert numeric.distribution == {
        "histogram": {"edges": edges.tolist(), "counts": counts.tolist()},
        **numeric.stats,
    }
    assert categorical.distribution == {
        "top": [
            {"value": "b", "count": 3},
            {"value": "a", "count": 1},
            {"value": "c", "count": 1},
        ],
        "n_other": 0,
    }


# --- through the API, CSV and JSON, SQLite and PostgreSQL --------------------------------------

UNICODE = ["Ünïcode 名前 🌲", "é", "😀", "名", "a,b", 'say "hi"', "zz", "Zz", "1.50", "007"]


def _table(seed: int = 0, n_rows: int = 400) -> dict[str, list[Cell]]:
    """Columns of every shape the page draws: missing cells, constant, all missing, many
    categories with ties, Unicode."""
    rng = random.Random(seed)
    pool = UNICODE + [f"c{i}" for i in range(8)]
    return {
        "normal": [None if i % 13 == 0 else rng.gauss(3, 10) for i in range(n_rows)],
        "integers": [float(rng.randint(-20, 20)) for _ in range(n_rows)],
        "constant": [2.5] * n_rows,
        "empty": [None] * n_rows,
        "tiny": [
            None if i % 3 == 0 else rng.choice([1e-300, 2e-300, -1e-300]) for i in range(n_rows)
        ],
        "category": [None if i % 11 == 0 else rng.choice(pool) for i in range(n_rows)],
        "few": [rng.choice(["yes", "no"]) for _ in range(n_rows)],
    }


def _csv(table: dict[str, list[Cell]]) -> bytes:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(table)
    for row in zip(*table.values(), strict=True):
        writer.writerow(
            [
                "" if cell is None else repr(cell) if isinstance(cell, float) else cell
                for cell in row
            ]
        )
    return out.getvalue().encode()


def _expected(values: list[Cell]) -> dict[str, Any]:
    present = [value for value in values if value is not None]
    if all(isinstance(value, float) for value in present):
        array = np.array(present, dtype=np.float64)
        if not present:
            edges, counts = [], []
        elif array.min() == array.max():
            edges, counts = [present[0], present[0]], [len(present)]
        else:
            numpy_counts, numpy_edges = np.histogram(array, bins=HISTOGRAM_BINS)
            edges, counts = numpy_edges.tolist(), numpy_counts.tolist()
        return {"histogram": {"edges": edges, "counts": counts}}
    ranked = sorted(Counter(present).items(), key=lambda item: (-item[1], item[0]))
    top = ranked[:TOP_CATEGORIES]
    return {
        "top": [{"value": value, "count": count} for value, count in top],
        "n_other": len(present) - sum(count for _, count in top),
    }


def _strict_json(response: httpx.Response) -> Any:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the response")

    return json.loads(response.text, parse_constant=refuse)


def _check_columns(columns: list[dict[str, Any]], table: dict[str, list[Cell]]) -> None:
    assert [column["name"] for column in columns] == list(table)
    for column in columns:
        values = table[column["name"]]
        distribution = column["distribution"]
        expected = _expected(values)
        assert {key: distribution[key] for key in expected} == expected, column["name"]
        if column["kind"] == "categorical":
            counted = sum(t["count"] for t in distribution["top"]) + distribution["n_other"]
            assert counted + column["n_missing"] == len(values)
        if column["kind"] == "numeric":
            present = np.array([v for v in values if v is not None], dtype=np.float64)
            if present.size:
                assert distribution["min"] == present.min()
                assert distribution["max"] == present.max()
                assert distribution["mean"] == pytest.approx(present.mean(), rel=1e-12)
                assert distribution["std"] == pytest.approx(present.std(), rel=1e-9, abs=1e-300)
            else:
                assert [distribution[k] for k in ("min", "max", "mean", "std")] == [None] * 4


@pytest.mark.anyio
async def test_csv_and_json_uploads_store_numpys_histograms_and_counters_tops(
    any_client: httpx.AsyncClient,
) -> None:
    table = _table()
    uploads = [
        await any_client.post("/v1/datasets", files={"file": ("t.csv", _csv(table))}),
        await any_client.post(
            "/v1/datasets",
            json={
                "columns": list(table),
                "rows": [list(row) for row in zip(*table.values(), strict=True)],
            },
        ),
        await any_client.post(
            "/v1/datasets",
            json={
                "records": [
                    dict(zip(table, row, strict=True)) for row in zip(*table.values(), strict=True)
                ]
            },
        ),
    ]
    for upload in uploads:
        assert upload.status_code == 201, upload.text
        fetched = await any_client.get(f"/v1/datasets/{upload.json()['id']}")
        body = _strict_json(fetched)
        assert body == _strict_json(upload)
        _check_columns(body["columns"], table)
        kinds = {column["name"]: column["kind"] for column in body["columns"]}
        assert kinds == {
            "normal": "numeric",
            "integers": "numeric",
            "constant": "numeric",
            "empty": "numeric",
            "tiny": "numeric",
            "category": "categorical",
            "few": "categorical",
        }
    listing = await any_client.get("/v1/datasets")
    assert all("columns" not in item for item in listing.json()["items"])


@pytest.mark.anyio
async def test_a_column_forced_categorical_counts_its_texts(any_client: httpx.AsyncClient) -> None:
    data = b"code,amount\n007,1\n7,2\n007,3\n,4\n7.0,5\n"
    upload = await any_client.post(
        "/v1/datasets", files={"file": ("c.csv", data)}, data={"categorical": "code"}
    )
    assert upload.status_code == 201, upload.text
    code = upload.json()["columns"][0]
    assert code["distribution"] == {
        "top": [
            {"value": "007", "count": 2},
            {"value": "7", "count": 1},
            {"value": "7.0", "count": 1},
        ],
        "n_other": 0,
    }


@pytest.mark.anyio
async def test_overflowing_statistics_are_null_and_the_body_stays_json(
    any_client: httpx.AsyncClient,
) -> None:
    values = [1.7e308, -1.7e308, 1.6e308, 1.5e308, None]
    upload = await any_client.post(
        "/v1/datasets", json={"columns": ["x"], "rows": [[v] for v in values]}
    )
    assert upload.status_code == 201, upload.text
    distribution = _strict_json(await any_client.get(f"/v1/datasets/{upload.json()['id']}"))[
        "columns"
    ][0]["distribution"]
    assert (distribution["min"], distribution["max"]) == (-1.7e308, 1.7e308)
    assert distribution["mean"] is None and distribution["std"] is None
    present = np.array([v for v in values if v is not None])
    _check_bins(present, distribution["histogram"])
