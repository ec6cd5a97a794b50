"""``coppice worker`` with the stand-in training function: the command's own code path.

Run as a script by the crash tests; configured, like the command, by ``COPPICE_*`` variables.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import worker_standins

from service.config import Settings
from service.worker.claim_loop import run_worker

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    sys.exit(run_worker(Settings(), train=worker_standins.standin))
