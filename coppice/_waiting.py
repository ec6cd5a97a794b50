"""Waiting for something the server runs (a job, a search): the progress display, and Ctrl-C.

Ctrl-C while waiting asks the server to cancel what is being waited for, then lets
``KeyboardInterrupt`` through, as h2o-py's job poller does: the interrupt says "stop", and a
job or search left running on the server would go on using its workers.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from coppice._progress import Progress, progress_display
from coppice.errors import CoppiceError


@contextlib.contextmanager
def watching(
    kind: str,
    resource_id: str,
    cancel: Callable[[], object],
    *,
    progress: bool,
    file: TextIO | None,
) -> Iterator[Progress | None]:
    """A display titled "``kind`` 5b7d1c2a" (``None`` without ``progress``) for the ``with``
    body; on Ctrl-C inside it, ``cancel()`` is called before ``KeyboardInterrupt`` goes on."""
    display = None
    try:
        # Inside the try: making the bar imports tqdm, long enough for a Ctrl-C to land in.
        display = progress_display(f"{kind} {resource_id[:8]}", file) if progress else None
        yield display
    except KeyboardInterrupt:
        out = file or sys.stderr
        print(f"\ninterrupted: cancelling {kind} {resource_id} on the server", file=out, flush=True)
        # It may have ended meanwhile (409), or the server be gone: the interrupt is what the
        # caller asked for either way, so it must not be replaced by an error.
        with contextlib.suppress(CoppiceError):
            cancel()
        raise
    finally:
        if display is not None:
            display.close()


class Deadline:
    """``timeout`` seconds from now (``None``: never); :meth:`left` caps a wait by it."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._at = None if timeout is None else time.monotonic() + timeout

    def left(self, step: float, still: Callable[[], str]) -> float:
        """``step``, or less when the deadline is nearer; ``TimeoutError`` once it passed,
        with ``still()`` ("job 5b7d… is still running (tree 3/9)") as its message."""
        if self._at is None:
            return step
        remaining = self._at - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(
                f"{still()} after {self.timeout:g} s; it goes on running on the server"
            )
        return min(step, remaining)


# How long one GET may wait on the server for the job or search to end. With a progress bar
# it returns every second with the latest stage; without one it can wait longer, so an
# hour-long fit costs the server one request per 30 s, yet the answer still comes the moment
# it ends.
WAIT_WITH_PROGRESS = 1.0
WAIT_QUIETLY = 30.0


def wait_on_server(
    refresh: Callable[[float], object],
    done: Callable[[], bool],
    show: Callable[[], None] | None,
    deadline: Deadline,
    still: Callable[[], str],
) -> None:
    """Look again (``refresh(wait)``: a GET with ``?wait=``) until ``done()``; ``show()``
    after every look when there is a display."""
    if show is not None:
        show()
    while not done():
        step = deadline.left(WAIT_WITH_PROGRESS if show is not None else WAIT_QUIETLY, still)
        asked = time.monotonic()
        refresh(step)
        early = step - (time.monotonic() - asked)
        if not done() and early > step / 2:
            # The server answered long before the wait it was asked for without the thing
            # having ended: it is shutting down. Pace the next look rather than spin.
            time.sleep(min(early, 1.0))
        if show is not None:
            show()
