"""How the command line prints: aligned tables for people, JSON for scripts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

Column = tuple[str, Callable[[dict[str, Any]], Any]]


def print_json(value: Any, file: TextIO | None = None) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False), file=file or sys.stdout)


def cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def print_table(
    rows: Sequence[dict[str, Any]], columns: Sequence[Column], file: TextIO | None = None
) -> None:
    """One line per row, columns padded to their widest cell; the last column unpadded."""
    out = file or sys.stdout
    table = [[title.upper() for title, _ in columns]]
    table += [[cell(read(row)) for _, read in columns] for row in rows]
    widths = [max(len(line[j]) for line in table) for j in range(len(columns))]
    for line in table:
        padded = [text.ljust(width) for text, width in zip(line[:-1], widths, strict=False)]
        print("  ".join([*padded, line[-1]]).rstrip(), file=out)


def print_fields(fields: Mapping[str, Any], file: TextIO | None = None) -> None:
    """``name: value`` lines, names aligned."""
    out = file or sys.stdout
    width = max((len(name) for name in fields), default=0)
    for name, value in fields.items():
        print(f"{name.ljust(width)}  {cell(value)}", file=out)


def percent(value: Any) -> str:
    return "-" if value is None else f"{100 * float(value):.0f}%"


def when(value: Any) -> str:
    """An ISO time to the second, as people read it."""
    return "-" if not value else str(value).replace("T", " ")[:19]


def page_note(shown: int, total: int, offset: int) -> None:
    """On stderr, so piping the table stays clean: how much of the listing was shown."""
    if total > shown:
        end = offset + shown
        print(f"({offset + 1}-{end} of {total}; --offset {end} for more)", file=sys.stderr)


def print_listing(
    items: list[dict[str, Any]], total: int, columns: Sequence[Column], args: argparse.Namespace
) -> int:
    """A ``list`` verb's output: the page as a table (with a note when there is more), or as
    the API's ``{"items", "total"}`` with ``--json``. Returns the exit code (0)."""
    if args.json:
        print_json({"items": items, "total": total})
        return 0
    print_table(items, columns)
    page_note(len(items), total, args.offset)
    return 0
