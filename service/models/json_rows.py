"""A predict body's ``rows`` read straight from its bytes into a float64 matrix.

A 20,000 × 40 ``rows`` body is 16 MB of JSON. Parsed by orjson it becomes 800,000 Python
floats in 20,000 lists, and ``np.array`` then copies them into the matrix the model reads:
together a whole in-process predict's time again (issue 26). This module reads the ``rows``
value in one compiled pass over the bytes instead: it checks JSON's grammar for an array of
equally long arrays of numbers and nulls, and converts each number into its float64.

The conversion is exactly rounded, as Python's ``float()`` and orjson's are: Clinger's fast
path where it is exact (at most 2^53 with a power of ten up to 22: one IEEE operation on two
exact operands, Clinger 1990, "How to read floating point numbers accurately"), else the
Eisel–Lemire algorithm (Lemire 2021, "Number parsing at a gigabyte per second", Software:
Practice and Experience 51(8); the tables and rounding as in the fast_float library, with
Mushtak & Lemire 2023, "Fast number parsing without fallback", for why one 128-bit product
suffices). Anything this pass does not handle with certainty — text, booleans, ``NaN``, more
than 19 significant digits, a subnormal or infinite value, ragged rows, a malformed body —
makes it answer None, and the caller parses the body as before (which also words any error).
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numba
import numpy as np
import numpy.typing as npt
from numba.cpython.unsafe.numbers import leading_zeros

# Imported for its effect: it points Numba's cache at the engine's kernel directory, which a
# kernel's cache location is fixed to when it is decorated. Decorated before it, these would
# cache elsewhere and a server importing them first would miss what `service.warmup` compiled.
import engine._kernels  # noqa: F401  isort: skip

_U64 = np.uint64
_MASK32 = _U64(0xFFFFFFFF)
_ALL_ONES = _U64(0xFFFFFFFFFFFFFFFF)
_SMALLEST_POWER = -342
_LARGEST_POWER = 308
_MANTISSA_BITS = 52
_PRECISION_MASK = _U64(0xFFFFFFFFFFFFFFFF >> 55)  # bit precision: mantissa bits + 3
_MAX_FAST_MANTISSA = _U64(2**53)
_EXACT_POWERS = np.array([10.0**k for k in range(23)])  # exact in float64 up to 10^22
# Eight ASCII digits tested and converted at once (SWAR), as fast_float reads them.
_HIGH_NIBBLES = _U64(0xF0F0F0F0F0F0F0F0)
_SIXES = _U64(0x0606060606060606)
_THREES = _U64(0x3333333333333333)
_ASCII_ZEROS = _U64(0x3030303030303030)
_LANES = _U64(0x000000FF000000FF)


def _powers_of_five() -> npt.NDArray[np.uint64]:
    """5^q for q in [-342, 308], normalized to 128 bits (high bit set), as (high, low) pairs:
    fast_float's table (negative powers: the reciprocal rounded up, then truncated)."""
    table = []
    for q in range(_SMALLEST_POWER, 0):
        power5 = 5**-q
        z = power5.bit_length()  # the least z with 2^z >= 5^-q (never a power of two)
        b = z + 127 if q >= -27 else 2 * z + 2 * 64
        c = 2**b // power5 + 1
        while c >= 1 << 128:
            c //= 2
        table.append(c)
    for q in range(_LARGEST_POWER + 1):
        power5 = 5**q
        while power5 < 1 << 127:
            power5 *= 2
        while power5 >= 1 << 128:
            power5 //= 2
        table.append(power5)
    return np.array([[c >> 64, c & (2**64 - 1)] for c in table], dtype=np.uint64)


_POWERS_OF_FIVE = _powers_of_five()

_FAIL = -1
_CLOSED = 0
_SPLIT = 1
_SPACE, _TAB, _NL, _CR = 32, 9, 10, 13
_OPEN, _CLOSE, _COMMA = 91, 93, 44
_MINUS, _PLUS, _DOT, _ZERO, _NINE = 45, 43, 46, 48, 57


@numba.njit(cache=True, nogil=True)
def _byte(buf: Any, i: int) -> int:
    return int(buf[i]) if i < buf.shape[0] else 0


@numba.njit(cache=True, nogil=True)
def _skip_space(buf: Any, i: int) -> int:
    n = buf.shape[0]
    while i < n:
        c = buf[i]
        if c != _SPACE and c != _NL and c != _CR and c != _TAB:
            break
        i += 1
    return i


@numba.njit(cache=True, nogil=True, inline="always")
def _multiply(a: Any, b: Any) -> tuple[Any, Any]:
    """The 128-bit product of two uint64, as (high, low)."""
    a_lo = a & _MASK32
    a_hi = a >> _U64(32)
    b_lo = b & _MASK32
    b_hi = b >> _U64(32)
    p0 = a_lo * b_lo
    p1 = a_lo * b_hi
    p2 = a_hi * b_lo
    p3 = a_hi * b_hi
    middle = (p0 >> _U64(32)) + (p1 & _MASK32) + (p2 & _MASK32)
    low = (p0 & _MASK32) | (middle << _U64(32))
    high = p3 + (p1 >> _U64(32)) + (p2 >> _U64(32)) + (middle >> _U64(32))
    return high, low


@numba.njit(cache=True, nogil=True, inline="always")
def _eisel_lemire(w: Any, q: int, powers: Any) -> Any:
    """The bits of the float64 nearest w × 10^q (w > 0, at most 19 digits), or all ones when
    this cannot say for sure (a subnormal, an infinity, an ambiguous product)."""
    if q < _SMALLEST_POWER:
        return _U64(0)  # below half the least subnormal: zero
    if q > _LARGEST_POWER:
        return _ALL_ONES
    lz = int(leading_zeros(w))  # type: ignore[call-arg]  # a Numba intrinsic
    w = w << _U64(lz)
    index = q - _SMALLEST_POWER
    high, low = _multiply(w, powers[index, 0])
    if (high & _PRECISION_MASK) == _PRECISION_MASK:
        second_high, _ = _multiply(w, powers[index, 1])
        low = low + second_high
        if second_high > low:
            high = high + _U64(1)
    if low == _ALL_ONES:
        return _ALL_ONES  # conservatively: the older papers' ambiguous case
    upper = int(high >> _U64(63))
    shift = upper + 64 - _MANTISSA_BITS - 3
    mantissa = high >> _U64(shift)
    power2 = (((152170 + 65536) * q) >> 16) + 63 + upper - lz + 1023
    if power2 <= 0:
        return _ALL_ONES  # subnormal: left to the general path
    halfway = low <= _U64(1) and -4 <= q <= 23 and (mantissa & _U64(3)) == _U64(1)
    if halfway and (mantissa << _U64(shift)) == high:
        mantissa = mantissa & ~_U64(1)  # exactly halfway: round to even
    mantissa = mantissa + (mantissa & _U64(1))
    mantissa = mantissa >> _U64(1)
    if mantissa >= (_U64(2) << _U64(_MANTISSA_BITS)):
        mantissa = _U64(1) << _U64(_MANTISSA_BITS)
        power2 += 1
    mantissa = mantissa & ~(_U64(1) << _U64(_MANTISSA_BITS))
    if power2 >= 0x7FF:
        return _ALL_ONES
    return mantissa | (_U64(power2) << _U64(_MANTISSA_BITS))


@numba.njit(cache=True, nogil=True)
def _load8(buf: Any, i: int) -> Any:
    """The eight bytes at ``buf[i:i + 8]`` as a little-endian uint64 (the caller checks the
    bounds); LLVM combines the loads into one."""
    return (
        _U64(buf[i])
        | (_U64(buf[i + 1]) << _U64(8))
        | (_U64(buf[i + 2]) << _U64(16))
        | (_U64(buf[i + 3]) << _U64(24))
        | (_U64(buf[i + 4]) << _U64(32))
        | (_U64(buf[i + 5]) << _U64(40))
        | (_U64(buf[i + 6]) << _U64(48))
        | (_U64(buf[i + 7]) << _U64(56))
    )


@numba.njit(cache=True, nogil=True)
def _eight_digits(v: Any) -> bool:
    """Whether all eight bytes packed in ``v`` are ASCII digits (fast_float's test)."""
    packed = (v & _HIGH_NIBBLES) | (((v + _SIXES) & _HIGH_NIBBLES) >> _U64(4))
    return bool(packed == _THREES)


@numba.njit(cache=True, nogil=True)
def _eight_value(v: Any) -> Any:
    """The number eight packed ASCII digits spell (fast_float's SWAR conversion)."""
    v = v - _ASCII_ZEROS
    v = (v * _U64(10)) + (v >> _U64(8))
    v = (
        ((v & _LANES) * _U64(100 + (1000000 << 32)))
        + (((v >> _U64(16)) & _LANES) * _U64(1 + (10000 << 32)))
    ) >> _U64(32)
    return v & _MASK32


@numba.njit(cache=True, nogil=True)
def _significant(buf: Any, first: int, end: int, fraction: int) -> int:
    """Significant digits of the number whose digits span ``buf[first:end]`` (``fraction`` of
    them after the point): leading zeros, as in "0.000123", are not."""
    j = first
    while j < end and (buf[j] == _ZERO or buf[j] == _DOT):
        j += 1
    significant = end - j
    if fraction and j < end - fraction:
        significant -= 1  # the point lies among them
    return significant


@numba.njit(cache=True, nogil=True)
def _exponent(buf: Any, i: int) -> tuple[int, int]:
    """The exponent whose digits (after "e" and a sign) start at ``i``: (index after it,
    value, at most 100,000 in size), or (_FAIL, 0)."""
    c = _byte(buf, i)
    negative = False
    if c in (_MINUS, _PLUS):
        negative = c == _MINUS
        i += 1
        c = _byte(buf, i)
    if c < _ZERO or c > _NINE:
        return _FAIL, 0
    exponent = 0
    while _ZERO <= c <= _NINE:
        if exponent < 100_000:
            exponent = exponent * 10 + (c - _ZERO)
        i += 1
        c = _byte(buf, i)
    return i, -exponent if negative else exponent


@numba.njit(cache=True, nogil=True)
def _separator(buf: Any, i: int) -> tuple[int, bool]:
    """After an item of an array: (index of the next item, True) after a comma, (index after
    the array, False) after its closing bracket, else (_FAIL, False)."""
    i = _skip_space(buf, i)
    c = _byte(buf, i)
    if c == _COMMA:
        return _skip_space(buf, i + 1), True
    if c == _CLOSE:
        return i + 1, False
    return _FAIL, False


@numba.njit(cache=True, nogil=True)
def _row(buf: Any, i: int, out: Any, bits: Any, at: int) -> tuple[int, int]:
    """Read the cells of the row whose first cell (or closing bracket) is at ``i`` into
    ``out[at:]``: (index after the row, cells), or (_FAIL, 0).

    The numbers are read here, not by a function called per number: Numba does not inline a
    function this size, and a call passing five arrays (each a struct of seven fields) cost
    as much as the reading itself (65 ms against 31 ms for 800,000 numbers, one thread).
    The tables are the module's arrays, which Numba compiles in as constants."""
    fail = (_FAIL, 0)
    n = buf.shape[0]
    cells = 0
    if _byte(buf, i) == _CLOSE:
        return i + 1, 0
    while True:
        if at + cells == out.shape[0]:
            return fail
        c = _byte(buf, i)
        if c == 110:  # n: null
            if not (_byte(buf, i + 1) == 117 and _byte(buf, i + 2) == 108
                    and _byte(buf, i + 3) == 108):  # fmt: skip
                return fail
            out[at + cells] = np.nan
            i += 4
        else:
            negative = c == _MINUS
            if negative:
                i += 1
                c = _byte(buf, i)
            if c < _ZERO or c > _NINE:
                return fail
            first = i
            w = _U64(0)
            if c == _ZERO:
                i += 1
                c = _byte(buf, i)
                if _ZERO <= c <= _NINE:
                    return fail  # JSON has no leading zeros
            else:
                while _ZERO <= c <= _NINE:
                    w = w * _U64(10) + _U64(c - _ZERO)
                    i += 1
                    c = _byte(buf, i)
            digits = i - first
            fraction = 0
            if c == _DOT:
                i += 1
                fraction_start = i
                # Eight digits at a time while there are (past 19 digits w wraps; the count
                # below then hands the number back before w is used).
                while i + 8 <= n:
                    v = _load8(buf, i)
                    if not _eight_digits(v):
                        break
                    w = w * _U64(100_000_000) + _eight_value(v)
                    i += 8
                c = _byte(buf, i)
                while _ZERO <= c <= _NINE:
                    w = w * _U64(10) + _U64(c - _ZERO)
                    i += 1
                    c = _byte(buf, i)
                fraction = i - fraction_start
                if fraction == 0:
                    return fail
                digits += fraction
            if digits > 19 and _significant(buf, first, i, fraction) > 19:
                return fail
            exponent = 0
            has_exponent = c == 101 or c == 69  # e, E
            if has_exponent:
                i, exponent = _exponent(buf, i + 1)
                if i == _FAIL:
                    return fail
            q = exponent - fraction
            if w == _U64(0):
                # "-0" is the integer 0 to a JSON parser (orjson, json), so +0.0; "-0.0" is -0.0.
                out[at + cells] = -0.0 if negative and (fraction or has_exponent) else 0.0
            elif -22 <= q <= 22 and w <= _MAX_FAST_MANTISSA:
                value = float(w)
                value = value * _EXACT_POWERS[q] if q >= 0 else value / _EXACT_POWERS[-q]
                out[at + cells] = -value if negative else value
            else:
                found = _eisel_lemire(w, q, _POWERS_OF_FIVE)
                if found == _ALL_ONES:
                    return fail
                bits[at + cells] = found | (_U64(1) << _U64(63)) if negative else found
        cells += 1
        i = _skip_space(buf, i)
        c = _byte(buf, i)
        if c == _CLOSE:
            return i + 1, cells
        if c != _COMMA:
            return fail
        i = _skip_space(buf, i + 1)


@numba.njit(cache=True, nogil=True)
def _rows(
    buf: Any,
    i: int,
    stop: int,
    inside: bool,
    max_rows: int,
    out: Any,
    bits: Any,
) -> tuple[int, int, int, int]:
    """Parse the array of rows starting at ``i`` (at its first row when ``inside``): (_CLOSED,
    index after the array, rows, cells per row); (_SPLIT, index of the next row, …) when a
    comma between rows lies at or past ``stop``; (_FAIL, 0, 0, 0) for anything else."""
    fail = (_FAIL, 0, 0, 0)
    if not inside:
        i = _skip_space(buf, i)
        if _byte(buf, i) != _OPEN:
            return fail
        i = _skip_space(buf, i + 1)
        if _byte(buf, i) == _CLOSE:
            return _CLOSED, i + 1, 0, 0
    width = -1
    row = 0
    at = 0
    while True:
        if row == max_rows or _byte(buf, i) != _OPEN:
            return fail
        i, cells = _row(buf, _skip_space(buf, i + 1), out, bits, at)
        if i == _FAIL:
            return fail
        at += cells
        if width == -1:
            width = cells
        elif cells != width:
            return fail  # ragged: the general path names the row
        row += 1
        row_end = i
        i, more = _separator(buf, i)
        if i == _FAIL:
            return fail
        if not more:
            return _CLOSED, i, row, width
        if row_end >= stop:
            return _SPLIT, i, row, width


# Bodies whose rows take more bytes than this are read by two threads, each half its rows
# (the kernel releases the GIL); below it a thread hand-over costs more than it saves.
SPLIT_BYTES = 1 << 20
_ROW_BREAK = re.compile(rb"\]\s*,\s*\[")
_helper: ThreadPoolExecutor | None = None


def _read(
    buf: npt.NDArray[np.uint8], i: int, stop: int, inside: bool, size: int, max_rows: int
) -> tuple[int, int, npt.NDArray[np.float64]]:
    """(status, end, the rows as a matrix) of the rows at ``buf[i:]``, at most ``size``
    bytes of them."""
    # Each cell takes a byte and is followed by a comma or a bracket: at most this many.
    out = np.empty(size // 2 + 1, dtype=np.float64)
    status, end, n_rows, width = _rows(buf, i, stop, inside, max_rows, out, out.view(np.uint64))
    if status == _FAIL:
        return _FAIL, 0, out[:0].reshape(0, 0)
    return status, end, out[: n_rows * width].reshape(n_rows, max(width, 0))


def parse_rows(
    body: bytes, start: int, max_rows: int
) -> tuple[npt.NDArray[np.float64], int] | None:
    """The array of equal rows of numbers and nulls at ``body[start:]`` as an (n_rows,
    n_cells) float64 matrix (null → NaN), and the index just after it; None when the value is
    anything else, or holds more than ``max_rows`` rows, or a number this cannot convert with
    certainty (the caller then parses the body as JSON).

    A large body is read in two halves at once: the first from ``start`` to the first break
    between rows past the middle, the second from there. A "break" found past the end of the
    rows (in a later key) is harmless: the first half then reaches the array's end itself."""
    global _helper
    buf = np.frombuffer(body, dtype=np.uint8)
    size = len(body) - start
    split = _ROW_BREAK.search(body, start + size // 2) if size > SPLIT_BYTES else None
    if split is None:
        status, end, matrix = _read(buf, start, len(body), False, size, max_rows)
        return None if status != _CLOSED else (matrix, end)
    if _helper is None:
        _helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rows-reader")
    second = _helper.submit(
        _read, buf, split.end() - 1, len(body), True, len(body) - split.end() + 1, max_rows
    )
    status, end, first = _read(buf, start, split.start(), False, split.end() - start, max_rows)
    rest = second.result()
    if status == _CLOSED:
        return first, end
    if status != _SPLIT or rest[0] != _CLOSED or end != split.end() - 1:
        return None
    if first.shape[1] != rest[2].shape[1] or first.shape[0] + rest[2].shape[0] > max_rows:
        return None
    return np.concatenate([first, rest[2]]), rest[1]
