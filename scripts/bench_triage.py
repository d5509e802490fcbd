"""Triage speed in a real browser: how long a reviewer waits on Failures' selected row for *Next* / *Previous* (the
Question page redrawn on the next row's stored trace) and for *Save the annotation*. Drives Debian's
/usr/bin/chromium through Playwright against `python -m tmem app` on a copy of a database with the demo batch
stored (`python -m tmem run --corpus demo --variants full,flat,no-discovery,no-structuring --offline`), like
scripts/bench_pages.py, whose timing rule it uses (navigation -> the end of the last script run).

    python scripts/bench_triage.py --db /tmp/bench.duckdb [--steps 6] [--load 2] [--json out.json]

`--load N` runs N busy processes beside it (the machine at load N). Targets (issue 42): Next / Previous ≤ 1.5 s,
Save ≤ 1 s at load ≤ 2. A figure, not a test.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_pages as bp  # noqa: E402 - the server, the browser and the timing rule


def _row(page, index: int) -> None:
    """Select row `index` of the first table (its selection cell)."""
    grid = page.locator('[data-testid="stDataFrame"]').first
    grid.wait_for(timeout=120_000)
    # typing the note scrolls the table out of view: a click at its old place selected nothing, so every Save
    # after the first was measured on the same row
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17 + 35 * index)


def _timed(page, action) -> float:
    started = time.perf_counter()
    action()
    return bp.settled(page, started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="a database with a stored batch run (copied first)")
    parser.add_argument("--steps", type=int, default=6, help="Next clicks, then as many Previous clicks")
    parser.add_argument("--load", type=int, default=0, help="busy processes running beside the benchmark")
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    work = Path(tempfile.mkdtemp(prefix="bench-triage-"))
    db = work / "triage.duckdb"
    shutil.copy(args.db, db)
    burners = bp.start_load(args.load)
    proc, url = bp.start_server(db, work / "server.log")
    figures: dict[str, list[float]] = {"next": [], "previous": [], "save": []}
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=bp.CHROMIUM, args=bp.ARGS)
            page = browser.new_page(viewport={"width": args.width, "height": 1200})
            page.goto(f"{url}/failures?corpus=demo", wait_until="commit")
            bp.settled(page, time.perf_counter())
            _row(page, 0)
            bp.settled(page, time.perf_counter())
            for k in range(3):  # Save on three rows, the form filled each time
                page.get_by_label("Note").fill(f"benchmark note {k}")
                figures["save"].append(_timed(page, lambda: page.get_by_role(
                    "button", name="Save the annotation").click()))
                _row(page, k + 1)
                bp.settled(page, time.perf_counter())
            _timed(page, lambda: page.get_by_role("button", name="Open on the Question page").click())
            for name, button in (("next", "Next"), ("previous", "Previous")):
                for _ in range(args.steps):
                    figures[name].append(_timed(page, lambda b=button: page.get_by_role("button", name=b).click()))
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for burner in burners:
            burner.terminate()
        shutil.rmtree(work, ignore_errors=True)
    for name, values in figures.items():
        print(f"{name:<9} median {statistics.median(values):5.2f} s  max {max(values):5.2f} s  "
              f"({', '.join(f'{v:.2f}' for v in values)})")
    if args.json:
        args.json.write_text(json.dumps({"load": args.load, "figures": figures}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
