"""Progress lines the benchmark scripts write to stderr, each stamped with the time of day."""

from __future__ import annotations

import sys
import time


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)
