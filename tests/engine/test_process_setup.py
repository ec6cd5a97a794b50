"""How the engine's and the service's processes start, and how a dead one is described."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine.process_setup import (
    default_start_method,
    describe_exit,
    limit_malloc_arenas,
    process_context,
)


def test_exit_descriptions() -> None:
    assert describe_exit(-9) == "was killed by signal 9 (SIGKILL, often the out-of-memory killer)"
    assert describe_exit(-15) == "was killed by signal 15 (SIGTERM)"
    assert describe_exit(-200) == "was killed by signal 200"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(None) == "is still running"


def test_fork_only_where_no_other_thread_runs_and_where_allowed() -> None:
    assert default_start_method(allow_fork=False) != "fork"
    release = threading.Event()
    thread = threading.Thread(target=release.wait)
    thread.start()
    try:
        # Forking now would copy locks the other thread may hold.
        assert default_start_method() != "fork"
    finally:
        release.set()
        thread.join()


@pytest.mark.parametrize(("method", "imported_here"), [("fork", True), ("spawn", False)])
def test_a_forking_context_imports_the_preload_here_first(
    method: str, imported_here: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What a fork server would import before forking, a forking process imports itself, so
    # its children inherit it (the process pool's workers inherit the loaded kernels so);
    # a spawned child imports what it needs on its own.
    (tmp_path / "preload_probe.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "preload_probe", raising=False)
    try:
        context = process_context(["preload_probe"], method=method)
        assert context.get_start_method() == method
        assert ("preload_probe" in sys.modules) == imported_here
    finally:
        sys.modules.pop("preload_probe", None)


_COUNT_ARENAS = """
import ctypes, sys, threading
from engine.process_setup import limit_malloc_arenas
applied = limit_malloc_arenas(2) if sys.argv[1] == "limited" else False
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
barrier = threading.Barrier(6)
def allocate():
    barrier.wait()  # all six threads alive at once, each asking for its first blocks
    libc.malloc(64 * 1024)
    barrier.wait()
threads = [threading.Thread(target=allocate) for _ in range(6)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(applied)
libc.malloc_stats()  # one "Arena N:" block per arena, on stderr
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc arenas")
@pytest.mark.parametrize("mode", ["limited", "default"])
def test_limiting_malloc_arenas_keeps_threads_to_that_many(mode: str) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", _COUNT_ARENAS, mode],
        capture_output=True,
        text=True,
        env=environment,
        check=True,
    )
    arenas = sum(line.startswith("Arena ") for line in done.stderr.splitlines())
    if mode == "limited":
        assert done.stdout.strip() == "True"
        assert 1 <= arenas <= 2
    else:
        # Each new thread takes an arena of its own (glibc allows eight per core).
        assert arenas > 2


def test_an_operator_s_malloc_arena_max_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas(2) is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_trimming_gives_freed_heap_pages_back() -> None:
    # Blocks under glibc's mmap threshold come from the heap; freed, they stay in the RSS
    # (keep_freed_memory raises the trim threshold so) until trimmed.
    script = """
import numpy as np
from pathlib import Path
from engine.process_setup import keep_freed_memory, trim_freed_memory

def rss():
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096

keep_freed_memory()
blocks = [np.ones(50_000) for _ in range(2_000)]  # 400 kB each, 800 MB in all
del blocks
kept = rss()
assert trim_freed_memory()
print(kept - rss())
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    # glibc gave back all but the trim threshold's 256 MiB on its own; the trim, the rest
    # (measured: 252 MiB).
    assert int(done.stdout) > 128 * 2**20
