"""Tables and waits the client's tests share (fixtures are in conftest.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from coppice import Client

# The shared server's upload limit: room for the 50 MB upload test, small enough that an
# oversized file is cheap to refuse.
MAX_UPLOAD_BYTES = 64 * 1024 * 1024

# A fit long enough to be interrupted: thousands of boosting stages (it never runs to the end).
LONG_FIT = {"method": "gradient_boosting", "params": {"n_estimators": 5000, "max_depth": 3}}


def churn_frame(n: int = 240, seed: int = 0) -> pd.DataFrame:
    """A table with numeric, categorical and missing values; the target follows two features."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.integers(18, 80, n).astype(float),
            "plan": rng.choice(["basic", "pro", "007"], n),
            "monthly": rng.normal(50, 20, n).round(2),
        }
    )
    frame.loc[::17, "monthly"] = np.nan
    score = (frame["plan"] == "pro") * 1.5 + frame["monthly"].fillna(50) / 40
    frame["churned"] = np.where(score + rng.normal(0, 0.3, n) > 2.0, "yes", "no")
    return frame


def write_csv(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(path, index=False)
    return path


def wait_until_running(client: Client, job_id: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while (job := client.job(job_id)).status != "running" or job.progress == 0:
        assert not job.done and time.monotonic() < deadline, job.info
        time.sleep(0.1)


def interrupt_waiter(script: str, args: list[str], ready: Callable[[str], None]) -> tuple[str, str]:
    """Run ``script`` (which prints the id of what it then waits for) in a child Python with
    ``args``; once ``ready(id)`` returns, send it SIGINT. Returns the id and its stderr."""
    waiter = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=interruptible,
    )
    try:
        assert waiter.stdout is not None
        waited_for = waiter.stdout.readline().strip()
        ready(waited_for)
        waiter.send_signal(signal.SIGINT)
        _, err = waiter.communicate(timeout=30)
    finally:
        waiter.kill()
    return waited_for, err


def interruptible() -> None:
    """``preexec_fn`` for a child that a test interrupts with SIGINT: pytest-xdist's workers
    ignore SIGINT, and an ignored signal stays ignored across exec, so the child's Python would
    never raise KeyboardInterrupt."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
