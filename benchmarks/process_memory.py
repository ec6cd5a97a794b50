"""This process's memory as Linux reports it, for the memory benchmarks."""

from __future__ import annotations

from pathlib import Path


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
