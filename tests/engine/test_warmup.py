"""`engine.warmup` reaches every compiled kernel.

A kernel it misses is compiled at its first real call instead: in a server, at the first request
that needs it (the first `explain` took 3 s idle and over 5 s under load before warm-up explained
trees too). The check runs in a fresh interpreter that imports every engine module and warms up.
With the cache on disk (``make kernels``), kernels load instead of compiling, and a kernel only
ever called from other kernels is loaded inside its callers' machine code and shows no signature
of its own: such a kernel must be named in another kernel's source (an inlined one counts).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from engine._kernels import compiled_kernels

_PROBE = """
import importlib, inspect, json, pkgutil
import engine
from engine._kernels import kernels_defined
from engine.warmup import warm_kernels

from numba.core.registry import CPUDispatcher

modules = []
for found in pkgutil.walk_packages(engine.__path__, "engine."):
    if "_dask" not in found.name:  # the optional extra; its kernels are the same histograms
        modules.append(importlib.import_module(found.name))
warm_kernels()
kernels = kernels_defined()
# Callers include the inlined kernels (not in the registry: they never run on their own), whose
# code is compiled into the kernels that call them.
compiled = {
    value.py_func: value
    for module in modules
    for value in vars(module).values()
    if isinstance(value, CPUDispatcher)
}
sources = {func: inspect.getsource(func) for func in compiled}
cold = []
for k in kernels:
    name = k.py_func.__name__
    called_by_kernel = any(
        f"{name}(" in source for func, source in sources.items() if func is not k.py_func
    )
    if not k.signatures and not called_by_kernel:
        cold.append(f"{k.py_func.__module__}.{name}")
print(json.dumps({"kernels": len(kernels), "cold": cold}))
"""


@pytest.mark.skipif(not compiled_kernels(), reason="the NumPy twins compile nothing")
def test_warm_up_compiles_every_kernel_a_request_can_reach() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=600, check=True
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["kernels"] >= 30  # the registry sees the engine's kernels
    assert report["cold"] == []
