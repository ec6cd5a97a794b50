"""A column's categories, however they are kept while parsed, are what a dict and sorted()
give; a column of unique strings costs under twice its bytes through the upload path."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import textwrap
import zlib
from array import array
from collections.abc import Callable

import numpy as np
import pytest

from service.datasets import categories, texts
from service.datasets.categories import (
    CategoricalCells,
    estimated_categories,
    json_list_bytes,
    top_indices,
)
from service.datasets.columns import (
    CategoricalColumn,
    ColumnBuilder,
    decode_column,
    encode_column,
    summarize,
)
from service.datasets.texts import FixedWidthTexts

MISSING = ("", "NA", " null ")


def _pool(rng: random.Random, n: int, width: Callable[[], int], alphabet: str) -> list[str]:
    found: set[str] = set()
    while len(found) < n:
        found.add("".join(rng.choices(alphabet, k=width())))
    return sorted(found)


def _cells(shape: str) -> list[str]:
    """A column's cells, some missing, for each way the categories can be kept."""
    rng = random.Random(shape)
    mixed = 'abcXYZ019 é字😀"\\\t'
    if shape == "few":  # a dict throughout
        pool = _pool(rng, 40, lambda: rng.randint(1, 6), mixed)
        cells = [rng.choice(pool) for _ in range(3000)]
    elif shape == "repeated, fixed width":  # records with equal texts, within and across runs
        pool = _pool(rng, 300, lambda: 5, "0123456789abcdef")
        cells = [rng.choice(pool) for _ in range(30 * len(pool))]
    elif shape == "unique fixed width":  # the buffer's records, no padding
        cells = [f"id-{i * 7919 % 100_003:06d}" for i in range(5000)]
    elif shape == "fixed width, missing":  # padded records (missing cells are empty)
        cells = [f"{i * 7919 % 100_003:06x}" for i in range(5000)]
        cells[::7] = [MISSING[i % 3] for i in range(len(cells[::7]))]
    elif shape == "near widths, utf-8":  # padded records, multi-byte characters
        pool = [text + rng.choice("aé字😀") for text in _pool(rng, 3000, lambda: 9, mixed[:9])]
        cells = [rng.choice(pool) for _ in range(4000)]
    elif shape == "uneven widths":  # merged in Python
        pool = _pool(rng, 2000, lambda: rng.choice([1, 2, 3, 40]), mixed)
        cells = [rng.choice(pool) for _ in range(3000)] + ["NA"] * 30
    else:  # "nul": merged in Python (trailing NULs would read as padding)
        pool = _pool(rng, 2000, lambda: rng.randint(1, 9), "ab\x00")
        pool += ["a", "a\x00", "a\x00\x00", "\x00", "b\x00a"]
        cells = [rng.choice(pool) for _ in range(3000)] + [""] * 20
    rng.shuffle(cells)
    return cells


def _reference(cells: list[str]) -> tuple[list[int], list[str]]:
    present = [cell.strip() for cell in cells if cell.strip() not in ("", "NA", "null")]
    found = sorted(set(present))
    position = {text: code for code, text in enumerate(found)}
    return [position.get(cell.strip(), -1) for cell in cells], found


SHAPES = {
    "few": tuple,
    "repeated, fixed width": FixedWidthTexts,
    "unique fixed width": FixedWidthTexts,
    "fixed width, missing": FixedWidthTexts,
    "near widths, utf-8": FixedWidthTexts,
    "uneven widths": texts._RowTexts,
    "nul": texts._RowTexts,
}


@pytest.mark.parametrize("small_steps", [False, True], ids=["", "small steps"])
@pytest.mark.parametrize("shape", SHAPES)
def test_codes_and_categories_equal_a_dict_and_sorted(
    monkeypatch: pytest.MonkeyPatch, shape: str, small_steps: bool
) -> None:
    monkeypatch.setattr(categories, "DICT_LIMIT", 200)  # scaled down with the columns
    monkeypatch.setattr(categories, "DICT_MAX", 200)  # raw past it, however texts repeat
    if small_steps:  # every batch, run and slice boundary crossed many times
        monkeypatch.setattr(texts, "BATCH", 7)
        monkeypatch.setattr(texts, "RUN", 5)
        monkeypatch.setattr(texts, "_UINT32_MAX", 1000)  # 64-bit offsets past 1000 bytes
    cells = _cells(shape)
    builder = ColumnBuilder("key")
    for cell in cells:
        builder.add_text(cell)
    column = builder.finish(categorical=True)
    assert isinstance(column, CategoricalColumn)
    expected_codes, expected = _reference(cells)

    assert isinstance(column.categories, SHAPES[shape])
    assert column.codes.dtype == np.int32
    assert column.codes.tolist() == expected_codes
    assert list(column.categories) == expected
    assert len(column.categories) == len(expected)
    assert column.categories == tuple(expected)
    assert column.categories[0] == expected[0]
    assert column.categories[-1] == expected[-1]
    assert list(column.categories[2:9]) == expected[2:9]
    assert list(column.categories[::-97]) == expected[::-97]
    with pytest.raises(IndexError):
        column.categories[len(expected)]
    assert b"".join(json_list_bytes(column.categories)) == json.dumps(expected).encode()


@pytest.mark.parametrize(
    ("n_categories", "repeats", "kept"),
    [
        (600, 20, "dict"),  # estimated at about 600 when 201 are seen: the dict stays
        (3000, 3, "raw"),  # estimated at about 5000 at once
        (1500, 60, "dict"),
        (1900, 10, "raw"),  # estimated at about 1600 at first, 2600 at the next look
    ],
)
def test_a_dict_is_kept_while_the_categories_are_estimated_to_stay_few(
    monkeypatch: pytest.MonkeyPatch, n_categories: int, repeats: int, kept: str
) -> None:
    monkeypatch.setattr(categories, "DICT_LIMIT", 200)
    monkeypatch.setattr(categories, "DICT_MAX", 2000)
    rng = random.Random(n_categories)
    cells = [f"c{i:04d}" for i in range(n_categories) for _ in range(repeats)]
    rng.shuffle(cells)
    builder = ColumnBuilder("key")
    for cell in cells:
        builder.add_text(cell)
    column = builder.finish()
    assert isinstance(column, CategoricalColumn)
    assert isinstance(column.categories, tuple if kept == "dict" else FixedWidthTexts)
    expected_codes, expected = _reference(cells)
    assert column.codes.tolist() == expected_codes
    assert list(column.categories) == expected


def test_the_estimate_of_categories_follows_chao1() -> None:
    # k seen, f1 once and f2 twice: k + f1 (f1 - 1) / (2 (f2 + 1)).
    codes = array("i", [0, 1, 1, 2, 2, 3, 3, 3, -1, 4])
    assert estimated_categories(codes) == 5 + 2 * 1 / (2 * 3)
    assert estimated_categories(array("i", range(1000))) == 1000 + 1000 * 999 / 2
    codes.append(5)  # the array's buffer was let go: it can grow


def test_a_column_that_turns_categorical_late_keeps_its_texts() -> None:
    cells = [str(i) for i in range(5000)] + ["1.50", "x"] + [f"{i:05d}" for i in range(5000)]
    builder = ColumnBuilder("n")
    for cell in cells:
        builder.add_text(cell)
    column = builder.finish()
    assert isinstance(column, CategoricalColumn)
    expected_codes, expected = _reference(cells)
    assert isinstance(column.categories, FixedWidthTexts)  # widths 1 to 5: padded
    assert column.codes.tolist() == expected_codes
    assert list(column.categories) == expected


def test_cells_are_spent_by_finish() -> None:
    cells = CategoricalCells()
    for i in range(10_000):
        cells.add(f"{i:08d}")
    codes, found = cells.finish()
    assert codes.tolist() == list(range(10_000))
    assert found[1234] == "00001234"


def test_a_column_of_many_categories_round_trips_and_summarises_as_before() -> None:
    cells = [f"id-{i * 7919 % 10007:05d}" for i in range(12000)] + ["", "NA"]
    builder = ColumnBuilder("key")
    for text in cells:
        builder.add_text(text)
    column = builder.finish()
    assert isinstance(column, CategoricalColumn)
    back = decode_column("key", column.kind, bytes(encode_column(column)))
    assert isinstance(back, CategoricalColumn)
    assert list(back.categories) == list(column.categories) == sorted(set(cells) - {"", "NA"})
    assert np.array_equal(back.codes, column.codes)
    summary = summarize(column)
    assert (summary.n_missing, summary.n_unique) == (2, 10007)
    counts = np.bincount(column.codes[column.codes >= 0])
    top = np.argsort(-counts, kind="stable")[:10]
    assert summary.stats["top"] == [
        {"value": column.categories[i], "count": int(counts[i])} for i in top
    ]
    # The stored layout is unchanged: a length, the JSON list of categories, int32 codes.
    payload = zlib.decompress(bytes(encode_column(column)))
    length = int.from_bytes(payload[:4], "little")
    assert json.loads(payload[4 : 4 + length]) == list(column.categories)
    codes = np.frombuffer(payload[4 + length :], dtype="<i4")
    assert codes.tolist() == column.codes.tolist()


@pytest.mark.parametrize("seed", range(5))
def test_top_indices_equal_a_stable_argsort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 4, size=rng.integers(1, 3000)).astype(np.int32)
    expected = np.argsort(-counts.astype(np.int64), kind="stable")[:10]
    assert top_indices(counts, 10).tolist() == expected.tolist()


@pytest.mark.parametrize("n", [3, 10, 11, 20_000])
def test_top_indices_of_equal_counts_are_the_first(n: int) -> None:
    # An id column: every category once. The first ten indices, in order.
    counts = np.ones(n, dtype=np.int32)
    assert top_indices(counts, 10).tolist() == list(range(min(n, 10)))


# The upload path in a fresh process, as benchmarks.csv_memory measures it: peak RSS growth
# (VmHWM, reset to the RSS once a first, smaller upload has paid its one-off costs) through
# parse_csv, finish and take_encoded, as a multiple of the file.
_MEASURE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from service.datasets.columns import take_encoded
    from service.datasets.ingest import parse_csv

    def csv(rows, length):
        digits, mixer = length - 3, 0x9E3779B97F4A7C15F39CC0605CEDC835
        lines = "".join(f"id-{i * mixer % 16**digits:0{digits}x}\\n" for i in range(rows))
        return ("key\\n" + lines).encode()

    def upload(data, peaks):
        chunks = (data[i : i + 65536] for i in range(0, len(data), 65536))
        table, counted = parse_csv(chunks, max_columns=1)
        peaks.append(high_water())
        parsed = table.finish([], size_bytes=counted.size, sha256=counted.sha256)
        del table
        peaks.append(high_water())
        for _ in take_encoded(parsed.columns):
            pass
        peaks.append(high_water())

    def high_water():
        status = Path("/proc/self/status").read_text()
        return int(status.split("VmHWM:")[1].split()[0]) * 1024

    rows, length = int(sys.argv[1]), int(sys.argv[2])
    upload(csv(20_000, length), [])
    data = csv(rows, length)
    Path("/proc/self/clear_refs").write_text("5")
    base, peaks = high_water(), []
    upload(data, peaks)
    print(" ".join(f"{(peak - base) / len(data):.3f}" for peak in peaks))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self")
@pytest.mark.parametrize("length", [12, 24])
def test_a_column_of_unique_strings_costs_under_twice_its_bytes(length: int) -> None:
    """Peak RSS growth through the upload path for 400,000 unique ids, a multiple of the
    file's bytes: it measured 1.2-1.5× (3.1× for 12 characters and 2.6× for 24 while the
    texts went through a table of distinct ones as they were parsed)."""
    command = [sys.executable, "-c", _MEASURE, "400000", str(length)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)
    except subprocess.CalledProcessError as error:
        if "clear_refs" in error.stderr:
            pytest.skip(f"cannot reset VmHWM: {error.stderr.strip().splitlines()[-1]}")
        raise
    parse, finish, encoded = map(float, result.stdout.split())
    assert max(parse, finish, encoded) < 2.0, (
        f"{length}-character ids: peak through parse {parse:.2f}×, finish {finish:.2f}×, "
        f"summary and encoding {encoded:.2f}× the file"
    )
