"""This process's memory as Linux reports it, for the memory benchmarks."""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def status_bytes(field: str) -> int:
    """A size field of ``/proc/self/status`` in bytes: ``VmRSS`` (resident now) or ``VmHWM``
    (its high-water mark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"{field} is not in /proc/self/status (not Linux?)")


def reset_high_water() -> None:
    """Bring ``VmHWM`` down to the present RSS (Linux 4.0 and later)."""
    Path("/proc/self/clear_refs").write_text("5")


class PhaseSampler:
    """Which phase of a run its resident set peaks in: a thread reads ``VmRSS`` every few
    milliseconds and charges it to the innermost of ``phases`` (function names) on the
    calling thread's stack, so a run's peak shows as "reading a part" or "growing a tree"
    instead of one number. Compiled kernels release the GIL, so it samples inside them too.
    Consecutive samples of one phase merge into one row: ``(phase, lowest, highest)`` RSS.
    """

    def __init__(self, phases: Sequence[str], every: float = 0.002) -> None:
        self.phases = frozenset(phases)
        self.every = every
        self.rows: list[list[Any]] = []
        self._thread_id = threading.get_ident()
        self._stop = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> PhaseSampler:
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._sampler.join()

    def _phase(self) -> str:
        frame = sys._current_frames().get(self._thread_id)
        while frame is not None:
            if frame.f_code.co_name in self.phases:
                return frame.f_code.co_name
            frame = frame.f_back
        return "-"

    def _sample(self) -> None:
        while not self._stop.wait(self.every):
            rss, phase = status_bytes("VmRSS"), self._phase()
            if self.rows and self.rows[-1][0] == phase:
                self.rows[-1][1] = min(self.rows[-1][1], rss)
                self.rows[-1][2] = max(self.rows[-1][2], rss)
            else:
                self.rows.append([phase, rss, rss])
