"""Parquet and Arrow through the client and the CLI against a real server: files and
DataFrames up, the table back down as Parquet, CSV or a DataFrame."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.feather as feather
import pyarrow.parquet as pq

from coppice import Client
from tests.client.helpers import churn_frame


def _kinds(columns: list[dict[str, object]]) -> dict[str, object]:
    return {str(c["name"]): c["kind"] for c in columns}


def test_parquet_and_arrow_files_upload_with_kinds_from_their_types(
    client: Client, tmp_path: Path
) -> None:
    table = pa.table({"x": [1.5, None, 3.0], "colour": ["red", None, "blue"], "n": [1, 2, 3]})
    pq.write_table(table, tmp_path / "t.parquet")
    feather.write_feather(table, tmp_path / "t.arrow")

    for name in ("t.parquet", "t.arrow"):
        dataset = client.upload(tmp_path / name)

        assert dataset.name == name and dataset.n_rows == 3
        assert _kinds(dataset.columns) == {"x": "numeric", "colour": "categorical", "n": "numeric"}
        assert dataset.storage is not None and dataset.storage["registered"] is False


def test_a_dataframe_goes_as_parquet_and_comes_back(client: Client, tmp_path: Path) -> None:
    frame = churn_frame(40)
    frame["code"] = ["007", "7", "0.50", None] * 10
    frame["flag"] = [True, False] * 20

    dataset = client.upload(frame, name="frame")

    assert dataset.name == "frame"
    kinds = _kinds(dataset.columns)
    assert kinds["code"] == kinds["flag"] == kinds["plan"] == "categorical"
    assert kinds["monthly"] == "numeric"
    back = dataset.to_pandas()
    assert list(back.columns) == list(frame.columns)
    np.testing.assert_array_equal(back["monthly"].to_numpy(), frame["monthly"].to_numpy())
    codes = [None if pd.isna(v) else v for v in frame["code"]]
    assert [None if pd.isna(v) else v for v in back["code"]] == codes
    assert back["flag"].tolist() == ["True", "False"] * 20

    as_parquet = dataset.download(tmp_path / "d.parquet")
    as_csv = dataset.download(tmp_path / "d.csv")
    assert pq.read_table(as_parquet).num_rows == 40
    csv_back = pa_csv.read_csv(
        io.BytesIO(as_csv.read_bytes()),
        convert_options=pa_csv.ConvertOptions(
            strings_can_be_null=True, column_types={"code": pa.string()}
        ),
    )
    assert csv_back.column("code").to_pylist() == codes
