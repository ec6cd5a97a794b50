"""Memory of saving a large forest into the data store and loading it back, in RSS.

    python -m benchmarks.artifact_memory [--trees 100] [--nodes 100000] [--mode stream|bytes|load]

A fitted forest's members are replaced by ``trees`` random trees of ``nodes`` nodes
(``tests.engine.large_forest``: the arrays of a large forest without growing one), then, in a
fresh process per mode, the process's RSS high-water mark (``VmHWM``, reset to the RSS just
before) measures what one step adds to the model already in memory:

- ``stream``: the fit process's path, ``write_artifact(store, id, save_model_pieces(model))``;
- ``bytes``: ``write_artifact(store, id, save_model(model))``, what the fit process did before
  streaming (run it with ``PYTHONPATH`` at an older checkout to measure that writer);
- ``load``: the API's path, ``load_model(read_artifact(store, stored))``, from the artifact
  ``stream`` wrote (growth over the process before reading; the model did not exist before).

Prints one JSON object per mode (without ``--mode``: all three, each in its own process).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from benchmarks.process_memory import reset_high_water, status_bytes

MiB = 2**20


def measure(mode: str, trees: int, nodes: int, directory: str) -> dict[str, Any]:
    import engine
    from service.models.artifacts import read_artifact, write_artifact
    from service.store import DataStore, StoredObject
    from tests.engine.large_forest import synthetic_forest

    store = DataStore(directory)
    result: dict[str, Any] = {"mode": mode, "trees": trees, "nodes_per_tree": nodes}
    if mode == "load":
        meta = json.loads((Path(directory) / "stored.json").read_text())
        stored = StoredObject(**meta)
        reset_high_water()
        before = status_bytes("VmRSS")
        model = engine.load_model(read_artifact(store, stored))
        result.update(artifact_mib=stored.size / MiB, members=len(model.members_))
    else:
        forest = synthetic_forest(trees, nodes)
        tree = forest.members_[0]
        result["tree_mib"] = (tree.nodes.nbytes + tree.values.nbytes) / MiB
        reset_high_water()
        before = status_bytes("VmRSS")
        if mode == "stream":
            stored = write_artifact(store, "m", engine.save_model_pieces(forest))
            (Path(directory) / "stored.json").write_text(
                json.dumps({"path": stored.path, "size": stored.size, "sha256": stored.sha256})
            )
        else:
            stored = write_artifact(store, "m", engine.save_model(forest))
        result["artifact_mib"] = stored.size / MiB
    result["rss_before_mib"] = before / MiB
    result["growth_mib"] = (status_bytes("VmHWM") - before) / MiB
    result["growth_over_artifact"] = result["growth_mib"] / result["artifact_mib"]
    return {key: round(v, 3) if isinstance(v, float) else v for key, v in result.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--mode", choices=["stream", "bytes", "load"])
    parser.add_argument("--dir", help="the store's directory (default: a temporary one)")
    args = parser.parse_args()
    if args.mode:
        print(json.dumps(measure(args.mode, args.trees, args.nodes, args.dir)))
        return
    with tempfile.TemporaryDirectory(prefix="coppice-artifact-memory-") as directory:
        for mode in ("stream", "load", "bytes"):
            command = [sys.executable, "-m", "benchmarks.artifact_memory", "--mode", mode]
            command += ["--trees", str(args.trees), "--nodes", str(args.nodes)]
            subprocess.run([*command, "--dir", directory], check=True)


if __name__ == "__main__":
    main()
