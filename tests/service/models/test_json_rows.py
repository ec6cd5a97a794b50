"""``rows`` read straight from a body's bytes: every float exactly as a JSON parser reads it,
and anything the reader is not certain of handed back (None) for the general path."""

from __future__ import annotations

import json
import random

import numpy as np
import orjson
import pytest

from service.models.json_rows import SPLIT_BYTES, parse_rows


def read(body: bytes) -> np.ndarray | None:
    parsed = parse_rows(body, 0, 10**6)
    return None if parsed is None else parsed[0]


def bits(values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype=np.float64).view(np.uint64)


@pytest.mark.parametrize("scale", [1e-300, 1e-20, 1e-3, 1.0, 1e7, 1e40, 1e300])
def test_shortest_reprs_read_back_bit_for_bit(scale: float) -> None:
    X = np.random.default_rng(0).normal(size=(500, 20)) * scale
    X[::7, 3] = np.nan
    rows = [[None if v != v else v for v in row] for row in X.tolist()]
    body = json.dumps(rows).encode()
    got = read(body)
    assert got is not None
    np.testing.assert_array_equal(bits(got), bits(X))


def test_decimal_strings_are_rounded_as_python_rounds_them() -> None:
    # Up to 19 significant digits and exponents across the whole range: Clinger's fast path,
    # Eisel-Lemire, and the cases either hands back (the test then asks orjson, as the
    # general path would).
    rng = random.Random(1)
    handed_back = 0
    for _ in range(20_000):
        digits = str(rng.randint(1, 9)) + "".join(
            rng.choice("0123456789") for _ in range(rng.randint(0, 18))
        )
        point = rng.randint(0, len(digits))
        text = digits[:point] + "." + digits[point:] if 0 < point < len(digits) else digits
        if rng.random() < 0.7:
            text += f"e{rng.randint(-340, 310)}"
        if rng.random() < 0.5:
            text = "-" + text
        got = read(f"[[{text}]]".encode())
        if got is None:
            handed_back += 1
            continue
        assert bits(got)[0, 0] == bits(np.array([float(text)]))[0], text
    assert handed_back < 1_000  # subnormals and infinities only


def test_long_fractions_read_eight_digits_at_a_time_are_exact() -> None:
    # Fractions of 1-24 digits (leading zeros among them), in one long body so the reader's
    # eight-digits-at-once step runs with bytes to spare after each number; a number of more
    # than 19 significant digits hands the whole body back, so those go in a body of their own.
    rng = random.Random(3)
    texts, too_long = [], []
    for _ in range(5_000):
        whole = rng.choice(["0", str(rng.randint(1, 9)), str(rng.randint(10, 99_999))])
        fraction = "0" * rng.randint(0, 12) + "".join(
            rng.choice("0123456789") for _ in range(rng.randint(1, 24))
        )
        text = f"{rng.choice(['', '-'])}{whole}.{fraction}{rng.choice(['', 'e-3', 'E+2'])}"
        digits = (whole + fraction).lstrip("0")
        (too_long if len(digits) > 19 else texts).append(text)
    got = read(f"[[{', '.join(texts)}]]".encode())
    assert got is not None
    np.testing.assert_array_equal(bits(got[0]), bits(np.array([float(t) for t in texts])))
    assert too_long and all(read(f"[[{t}, 1.5]]".encode()) is None for t in too_long[:200])
    # Leading zeros are not significant: 19 digits after them are still read.
    assert read(b"[[0.0000000000001234567890123456789]]") is not None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (b"[[1,2.5,null],[-0.0,1E3,-0]]", [[1.0, 2.5, None], [-0.0, 1000.0, 0.0]]),
        (b" [ [ 1 , 2 ] ,\n [3,4] ] ", [[1.0, 2.0], [3.0, 4.0]]),
        (b"[[1e-400]]", [[0.0]]),
        (b"[[1.7976931348623157e308, 2.2250738585072014e-308]]", None),
    ],
)
def test_what_orjson_reads_is_read(text: bytes, expected: list[list[float | None]] | None) -> None:
    got = read(text)
    assert got is not None
    want = np.array(orjson.loads(text) if expected is None else expected, dtype=np.float64)
    np.testing.assert_array_equal(bits(got), bits(want))
    assert read(text + b"  ,") is not None  # what follows the array is the caller's


@pytest.mark.parametrize(
    "text",
    [
        b"[[1,2],[3]]",  # ragged
        b"[[01]]",
        b"[[1.]]",
        b"[[.5]]",
        b"[[1e]]",
        b"[[+1]]",
        b"[[-]]",
        b"[[NaN]]",
        b"[[Infinity]]",
        b"[[1e400]]",  # infinite
        b"[[5e-324]]",  # subnormal
        b"[[12345678901234567890]]",  # 20 digits
        b"[[true]]",
        b'[["1"]]',
        b"[[{}]]",
        b"[[[1]]]",
        b"[[1,]]",
        b"[[,1]]",
        b"[[1] [2]]",
        b"[[1]",
        b"[[nul]]",
        b"[1]",
        b"{}",
    ],
)
def test_anything_uncertain_is_handed_back(text: bytes) -> None:
    assert read(text) is None


def test_more_rows_than_allowed_are_handed_back() -> None:
    assert parse_rows(b"[[1],[2],[3]]", 0, 2) is None
    parsed = parse_rows(b"[[1],[2],[3]]", 0, 3)
    assert parsed is not None and parsed[0].shape == (3, 1)


@pytest.mark.parametrize("spaced", [False, True])
def test_a_large_body_read_in_two_halves_is_read_whole(spaced: bool) -> None:
    X = np.random.default_rng(2).normal(size=(30_000, 8))
    X[::5, 1] = np.nan
    rows = [[None if v != v else v for v in row] for row in X.tolist()]
    text = json.dumps({"rows": rows, "columns": list("abcdefgh")}, indent=1 if spaced else None)
    body = text.encode()
    start = body.index(b"[")
    assert len(body) - start > SPLIT_BYTES
    parsed = parse_rows(body, start, 10**6)
    assert parsed is not None
    np.testing.assert_array_equal(bits(parsed[0]), bits(X))
    assert body[parsed[1] :].lstrip().startswith(b",")  # just after the rows
    # A bad cell in either half, ragged halves, and too many rows are all handed back.
    for bad in (text.replace("null", "true", 1), text[::-1].replace("llun", "eurt", 1)[::-1]):
        assert parse_rows(bad.encode(), start, 10**6) is None
    assert parse_rows(body, start, 29_999) is None
