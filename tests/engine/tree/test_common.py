"""The tree code's shared constants: consistent with the code dtypes, the only place the code
widths are written down, and part of the kernel cache's key."""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import numpy as np

from engine import _kernels
from engine.tree import _common
from engine.tree._binning import BinMapper
from engine.tree._common import (
    MAX_BINS,
    MAX_EXACT_BINS,
    MISSING_BIN,
    NARROW_CODE_DTYPE,
    WIDE_CODE_DTYPE,
    WIDE_MISSING_BIN,
    code_dtype,
    missing_code,
    n_codes,
)

TREE = Path(_common.__file__).parent
# Numbers that are code widths, missing codes or bin limits when they appear in tree code.
CODE_LITERALS = {255, 256, 65_535, 65_536}
# Literals equal to one of those by coincidence, not a code: (module, assigned name).
UNRELATED = {("_traversal.py", "MIN_ROWS_PER_BLOCK")}


def test_the_constants_follow_the_code_dtypes() -> None:
    assert missing_code(NARROW_CODE_DTYPE) == MISSING_BIN == np.iinfo(np.uint8).max
    assert missing_code(WIDE_CODE_DTYPE) == WIDE_MISSING_BIN == np.iinfo(np.uint16).max
    assert n_codes(NARROW_CODE_DTYPE) == 256 and n_codes(WIDE_CODE_DTYPE) == 65_536
    assert code_dtype(MAX_BINS) == NARROW_CODE_DTYPE
    assert code_dtype(MAX_BINS + 1) == code_dtype(MAX_EXACT_BINS) == WIDE_CODE_DTYPE
    # Every present bin has a code below the missing one.
    assert MAX_BINS - 1 < MISSING_BIN and MAX_EXACT_BINS - 1 < WIDE_MISSING_BIN


def test_binning_writes_the_common_missing_codes() -> None:
    narrow = np.array([[0.5], [np.nan], [1.5]])
    wide = np.concatenate([np.arange(400.0), [np.nan]])[:, None]
    for X, dtype, missing in (
        (narrow, NARROW_CODE_DTYPE, MISSING_BIN),
        (wide, WIDE_CODE_DTYPE, WIDE_MISSING_BIN),
    ):
        codes = BinMapper(exact=True).fit(X, np.zeros(1, dtype=bool)).transform(X)
        assert codes.dtype == dtype
        assert codes[np.isnan(X)].tolist() == [missing]


def test_no_tree_module_writes_a_code_width_as_a_number() -> None:
    found = []
    for path in sorted(TREE.glob("*.py")):
        if path.name == "_common.py":
            continue
        source = path.read_text(encoding="utf-8")
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type != tokenize.NUMBER:
                continue
            if ast.literal_eval(token.string) not in CODE_LITERALS:
                continue
            name = token.line.partition("=")[0].strip()
            if (path.name, name) not in UNRELATED:
                found.append(f"{path.name}:{token.start[0]}: {token.line.strip()}")
    assert not found, "use engine.tree._common instead:\n" + "\n".join(found)


def test_the_common_module_keys_the_kernel_cache() -> None:
    # Kernels read its constants as globals frozen into their machine code, so a change to
    # it must start a fresh kernel cache, as a change to a kernel module does.
    sources = _kernels.kernel_source_files()
    assert Path(_common.__file__).resolve() in sources
