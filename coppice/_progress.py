"""Progress on screen (a job's, a search's): a tqdm bar when tqdm is installed, lines otherwise.

``tqdm.auto`` draws a widget inside Jupyter and a console bar elsewhere. The widget needs
ipywidgets, and fails without it (``tqdm/tqdm#1082``) or in some JupyterLab set-ups
(``tqdm/tqdm#1497``); the console bar stands in then. A running job is shown at 99% at most,
as h2o does: 100% means the model exists. What is shown is a dict with the job's fields
``status``, ``progress`` (0-1) and ``stage``; a search is shown through the same three.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO

RUNNING_CEILING = 99


class Progress(Protocol):
    def show(self, job: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def _percent(job: dict[str, Any]) -> int:
    percent = round(100 * float(job.get("progress") or 0.0))
    return 100 if job.get("status") == "succeeded" else min(percent, RUNNING_CEILING)


def _label(job: dict[str, Any]) -> str:
    stage = job.get("stage") or ""
    status = str(job.get("status", ""))
    return f"{status}: {stage}" if stage and stage != status else status


class BarProgress:
    """A tqdm bar whose description is the status and stage ("running: tree 37/200")."""

    def __init__(self, title: str, file: TextIO | None = None) -> None:
        self._shown: tuple[str, int] | None = None
        self._bar = _make_bar(
            total=100,
            desc=title,
            file=file,
            bar_format="{desc} {percentage:3.0f}%|{bar}| [{elapsed}]",
        )

    def show(self, job: dict[str, Any]) -> None:
        shown = (_label(job), _percent(job))
        if shown == self._shown:
            return
        self._shown = shown
        self._bar.set_description_str(shown[0], refresh=False)
        # Set, not update(): update() draws on its own schedule, and a second draw of the
        # same state is a second line where the output is not a terminal (a log, a pipe).
        self._bar.n = shown[1]
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()


def _make_bar(**options: Any) -> Any:
    try:
        from tqdm.auto import tqdm

        return tqdm(**options)
    except Exception:  # the notebook widget failed to start: the console bar always works
        from tqdm.std import tqdm as console_tqdm

        return console_tqdm(**options)


class TextProgress:
    """Without tqdm: one line each time the stage changes, at most one a second."""

    def __init__(self, title: str, file: TextIO | None = None) -> None:
        self._title = title
        self._file = file
        self._last = ""
        self._shown_at = 0.0

    def show(self, job: dict[str, Any]) -> None:
        line = f"{self._title} {_percent(job):3d}% {_label(job)}"
        ended = job.get("status") in ("succeeded", "failed", "cancelled")
        now = time.monotonic()
        if line != self._last and (ended or now - self._shown_at >= 1.0):
            print(line, file=self._file or sys.stderr, flush=True)
            self._last, self._shown_at = line, now

    def close(self) -> None:
        pass


def progress_display(title: str, file: TextIO | None = None) -> Progress:
    """The best display this environment has; ``title`` says what is shown ("job 5b7d1c2a")."""
    try:
        import tqdm  # noqa: F401
    except ImportError:
        return TextProgress(title, file)
    return BarProgress(title, file)
