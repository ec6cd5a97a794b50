"""How soon the console's first page is interactive, in Debian's Chromium.

    python -m benchmarks.console_ready [--loads N]

A real ``coppice serve`` (SQLite in a temporary data dir); then ``--loads`` times a fresh
browser context (an empty cache, as a first visit) opens ``/`` and the page's own
``performance.mark("coppice:ready")`` (set once its first view has rendered and its controls
answer) is read, in milliseconds after navigation start. Reported: every load, the median and
the worst, against the 1 s target. It was a test's assertion until a loaded 2-core machine
measured 1.99 s with nothing wrong (issue 28); ``tests/browser`` now checks that the mark is
set, and the time lives here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

from playwright import sync_api

from tests.browser.conftest import CHROMIUM
from tests.e2e.processes import serving

TARGET_MS = 1000.0
READY = "performance.getEntriesByName('coppice:ready')[0].startTime"


def measure(url: str, loads: int) -> list[float]:
    """Milliseconds from navigation start to the ready mark, one per fresh context."""
    times = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM))
        try:
            for _ in range(1 + loads):  # the first load warms the server's files: not counted
                context = browser.new_context()
                page = context.new_page()
                page.goto(f"{url}/")
                page.wait_for_selector("html[data-ready]")
                times.append(float(page.evaluate(READY)))
                context.close()
        finally:
            browser.close()
    return times[1:]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loads", type=int, default=15, help="timed page loads (default 15)")
    args = parser.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"no Chromium at {CHROMIUM} (apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as root, serving(Path(root)) as (url, _):
        times = measure(url, args.loads)
    median = statistics.median(times)
    print("loads (ms): " + ", ".join(f"{t:.0f}" for t in times))
    verdict = "met" if median <= TARGET_MS else "NOT met"
    print(
        f"first page interactive: median {median:.0f} ms, worst {max(times):.0f} ms "
        f"over {len(times)} loads; target {TARGET_MS:.0f} ms: {verdict}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
