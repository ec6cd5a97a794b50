"""How the engine's and the service's processes start, and how a dead one is described."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import pytest

from engine.process_setup import default_start_method, describe_exit, process_context


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
