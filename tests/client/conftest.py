"""A real ``coppice serve`` per test module, and small tables to train on quickly.

Each module that needs a server gets one (module scope): starting it costs a few seconds, so
the client's tests share it and keep their data small and their models to a few trees.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coppice import Client, Model
from tests.e2e.processes import serving


@pytest.fixture(scope="module")
def server_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The module's server; a module that trains nothing sets ``SERVER_SETTINGS`` to
    ``{"embedded_worker": "false"}``, which starts and stops faster (no fit processes)."""
    settings = getattr(request.module, "SERVER_SETTINGS", {})
    with serving(tmp_path_factory.mktemp("client-server"), **settings) as (url, _processes):
        yield url


@pytest.fixture
def client(server_url: str) -> Iterator[Client]:
    with Client(server_url) as client:
        yield client


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


@pytest.fixture(scope="module")
def churn_model(server_url: str) -> Model:
    """A small forest trained once per module, with a holdout (so SHAP and permutation
    importances exist) and bootstrap (so OOB curves do)."""
    client = Client(server_url)
    dataset = client.upload(churn_frame(), name="churn")
    job = client.train(
        dataset,
        target="churned",
        method="random_forest",
        params={"n_estimators": 12, "max_depth": 5},
        validation={"holdout": 0.25},
        seed=1,
    )
    return job.wait(timeout=120)


def write_csv(path: Path, frame: pd.DataFrame) -> Path:
    frame.to_csv(path, index=False)
    return path
