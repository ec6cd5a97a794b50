"""The engine without Dask's ``distributed`` package (the optional extra ``coppice[dask]``).

Apart from the module that needs a cluster, so these run where ``distributed`` is missing too.
Each test runs a fresh interpreter: this one may have imported Dask already.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(script: str) -> None:
    subprocess.run([sys.executable, "-c", textwrap.dedent(script)], check=True, timeout=120)


def test_the_engine_imports_no_dask_without_a_client() -> None:
    _run(
        """
        import sys
        import numpy as np
        from engine import RandomForestClassifier
        X = np.random.default_rng(0).normal(size=(200, 3))
        RandomForestClassifier(n_estimators=4, n_jobs=2).fit(X, X[:, 0] > 0)
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("dask", "distributed"))
        assert not loaded, loaded
        """
    )


def test_without_distributed_fits_work_and_the_backend_names_the_extra() -> None:
    _run(
        """
        import sys
        sys.modules["distributed"] = None  # as if not installed: importing it fails
        import numpy as np
        from engine import RandomForestClassifier, XGBoostRegressor, parallel_backend
        X = np.random.default_rng(0).normal(size=(200, 3))
        RandomForestClassifier(n_estimators=4, n_jobs=2).fit(X, X[:, 0] > 0)
        XGBoostRegressor(n_estimators=3).fit(X, X[:, 1])
        try:
            with parallel_backend(object()):
                pass
        except ImportError as error:
            assert "coppice[dask]" in str(error), error
        else:
            raise AssertionError("parallel_backend worked without distributed")
        """
    )
