"""``coppice datasets upload x.parquet`` and ``coppice datasets download ID -o x.parquet``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from tests.client.cli.runner import Cli


def test_cli_uploads_parquet_and_downloads(cli: Cli, tmp_path: Path) -> None:
    frame = pd.DataFrame({"a": [1.0, 2.0, np.nan], "b": ["x", "y", "x"]})
    frame.to_parquet(tmp_path / "in.parquet")

    created = cli.json("datasets", "upload", str(tmp_path / "in.parquet"), "--json")
    out, _ = cli("datasets", "download", created["id"], "-o", str(tmp_path / "out.parquet"))
    shown, _ = cli("datasets", "show", created["id"])

    assert created["n_rows"] == 3
    assert "wrote" in out
    assert pq.read_table(tmp_path / "out.parquet").column("b").to_pylist() == ["x", "y", "x"]
    assert "1 Parquet part(s)" in shown and "in the data store" in shown
