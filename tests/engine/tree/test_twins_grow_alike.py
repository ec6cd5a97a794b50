"""The NumPy twins grow the same models as the compiled kernels, for every grower and task.

``COPPICE_ENGINE_KERNELS`` is read once, when the engine is imported, so each choice runs in a
process of its own; both fit the same matrix of models and print a digest of every model's
predictions on its training rows (probabilities for classifiers), which must agree to the
last bit. The matrix crosses every grower — split search from rows (per-split feature
sampling, best-first growth, exact binning's wide codes), from histograms (forests with every
feature a candidate, second- and first-order boosting) and random cuts (extra trees) — with
every task (two classes, three classes, regression), with and without missing values, and
with and without a categorical feature.

Multiclass boosting is where they once parted: its gradients take few distinct values, so
candidates of equal gain are common, and the twin's running sums (a global cumulative sum less
each segment's offset) rounded them apart from the kernel's, which add from each segment's
first bin; ``test_running_sums_add_from_the_segment_start`` holds the cause.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from engine.tree.split.gains import running_sums

FIT_MATRIX = """
import hashlib, itertools
import numpy as np, engine

rng = np.random.default_rng(0)
n = 700
X = rng.normal(size=(n, 6))
X[:, 5] = rng.integers(0, 6, n)  # a feature of six categories
signal = X[:, 0] + 0.5 * X[:, 1] ** 2 - 0.7 * (X[:, 5] % 3 == 1)
labels = {2: (signal > 0.3).astype(int), 3: np.digitize(signal, [-0.2, 0.8])}
value = signal + 0.1 * rng.normal(size=n)

def models(task, categorical):
    cat = {"categorical_features": [5]} if categorical else {}
    if task == "regression":
        forest, extra, tree = engine.RandomForestRegressor, engine.ExtraTreesRegressor, engine.DecisionTreeRegressor
        xgb, gb = engine.XGBoostRegressor, engine.GradientBoostingRegressor
    else:
        forest, extra, tree = engine.RandomForestClassifier, engine.ExtraTreesClassifier, engine.DecisionTreeClassifier
        xgb, gb = engine.XGBoostClassifier, engine.GradientBoostingClassifier
    return {
        "rows": forest(n_estimators=3, max_features="sqrt", **cat),
        "rows-best-first": tree(max_leaf_nodes=9, **cat),
        "rows-exact-codes": xgb(n_estimators=3, max_depth=4, tree_method="exact", **cat),
        "histograms": forest(n_estimators=3, max_features=None, **cat),
        "histograms-newton": xgb(n_estimators=5, max_depth=4, **cat),
        "histograms-gradient": gb(n_estimators=4, max_depth=3, **cat),
        "random-cuts": extra(n_estimators=3, **cat),
    }

for task, missing, categorical in itertools.product(
    ("binary", "multiclass", "regression"), (False, True), (False, True)
):
    data = X.copy()
    if missing:
        data[rng.random(data.shape) < 0.06] = np.nan
        data[::17, 2] = np.nan
    if not categorical:
        data[:, 5] += rng.normal(scale=0.3, size=n)  # then a numeric feature like the others
    target = {"binary": labels[2], "multiclass": labels[3], "regression": value}[task]
    for grower, model in models(task, categorical).items():
        model.set_params(random_state=0).fit(data, target)
        out = model.predict_proba(data) if task != "regression" else model.predict(data)
        digest = hashlib.sha256(np.ascontiguousarray(out, dtype=np.float64).tobytes())
        print(f"{grower}/{task}/missing={missing}/categorical={categorical}", digest.hexdigest())
"""

GROWERS = (
    "rows",
    "rows-best-first",
    "rows-exact-codes",
    "histograms",
    "histograms-newton",
    "histograms-gradient",
    "random-cuts",
)
CASES = [
    f"{grower}/{task}/missing={missing}/categorical={categorical}"
    for task in ("binary", "multiclass", "regression")
    for missing in (False, True)
    for categorical in (False, True)
    for grower in GROWERS
]


def _digests(kernels: str) -> dict[str, str]:
    env = {**os.environ, "COPPICE_ENGINE_KERNELS": kernels}
    result = subprocess.run(
        [sys.executable, "-c", FIT_MATRIX], env=env, capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stderr
    return dict(line.split(" ", 1) for line in result.stdout.splitlines())


@pytest.fixture(scope="module")
def digests() -> tuple[dict[str, str], dict[str, str]]:
    return _digests("numba"), _digests("numpy")


@pytest.mark.parametrize("case", CASES)
def test_the_twins_grow_the_kernels_model(
    digests: tuple[dict[str, str], dict[str, str]], case: str
) -> None:
    compiled, twins = digests
    assert set(compiled) == set(twins) == set(CASES)
    assert compiled[case] == twins[case], case


def test_running_sums_add_from_the_segment_start() -> None:
    # A segment of small sums after one of huge sums: a global cumulative sum less the
    # segment's offset loses the small ones entirely (1e20 + 1 - 1e20 = 0).
    values = np.array([[1e20], [1e20], [1.0], [2.0], [0.1], [0.2], [0.3]])
    segment = np.array([0, 0, 1, 1, 2, 2, 2])
    segment_first = np.array([0, 2, 4])
    expected = np.array([[1e20], [2e20], [1.0], [3.0], [0.1], [0.1 + 0.2], [0.1 + 0.2 + 0.3]])
    np.testing.assert_array_equal(running_sums(values, segment, segment_first), expected)
