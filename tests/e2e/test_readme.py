"""The README's Python quickstart runs as written against a real ``coppice serve``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.processes import serving

README = Path(__file__).resolve().parents[2] / "README.md"
QUICKSTART_URL = "http://127.0.0.1:8000"


def _python_quickstart() -> str:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    clients = [block for block in blocks if QUICKSTART_URL in block]
    assert len(clients) == 1, "the README should hold one Python client example"
    code: str = clients[0]
    return code


@pytest.mark.timeout(900)
def test_the_python_quickstart_runs(tmp_path: Path) -> None:
    code = _python_quickstart()
    with serving(tmp_path) as (base_url, processes):
        result = subprocess.run(
            [sys.executable, "-c", code.replace(QUICKSTART_URL, base_url)],
            capture_output=True,
            text=True,
            # Seconds on a quiet machine; it took over 180 s at load 15.
            timeout=600,
            check=False,
        )
        assert result.returncode == 0, result.stderr + processes.logs()
    # What it prints: validation metrics, a prediction with probabilities and contributions,
    # then SHAP importances (a DataFrame); the progress bar goes to stderr.
    assert "validation: {'accuracy'" in result.stdout
    assert "predicted: ['" in result.stdout and "contributions: [[" in result.stdout
    assert "importance" in result.stdout and "plan" in result.stdout
    assert "succeeded" in result.stderr
