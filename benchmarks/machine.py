"""A description of the machine and software a benchmark ran on, recorded with its results."""

from __future__ import annotations

import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["describe_machine"]

REPO_ROOT = Path(__file__).resolve().parent.parent

# Distribution names, not import names: the CPU-only XGBoost wheel is `xgboost-cpu`.
_PACKAGES = {
    "numpy": ("numpy",),
    "scikit-learn": ("scikit-learn",),
    "xgboost": ("xgboost-cpu", "xgboost"),
    "lightgbm": ("lightgbm",),
    "psutil": ("psutil",),
}

# Thread-count variables change what "n_jobs=2" means for OpenMP libraries; record them.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _usable_cpus() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _version(candidates: tuple[str, ...]) -> str | None:
    for name in candidates:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def describe_machine() -> dict[str, Any]:
    """CPU, cores, RAM, OS, Python, library versions and the engine's commit."""
    status = _git("status", "--porcelain", "--", "engine")
    return {
        "cpu": _cpu_model(),
        "logical_cpus": os.cpu_count(),
        "usable_cpus": _usable_cpus(),
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "packages": {name: _version(dists) for name, dists in _PACKAGES.items()},
        "coppice_commit": _git("rev-parse", "--short", "HEAD"),
        # Uncommitted engine changes mean the figures belong to no commit; say so.
        "engine_modified": bool(status) if status is not None else None,
        "thread_environment": {name: os.environ.get(name) for name in _THREAD_VARIABLES},
        "load_average_at_start": os.getloadavg()[0],
    }
