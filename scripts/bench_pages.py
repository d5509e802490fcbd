"""Page times of the explorer in a real browser: every page's first visit and second load, and the Question page's
tab switches, printed as a table (seconds). Drives Debian's /usr/bin/chromium through Playwright against
`python -m tmem app` on a database you give (with the demo batch stored: `python -m tmem run --corpus demo
--variants full,flat,no-discovery,no-structuring --offline`, 192 rows).

    python scripts/bench_pages.py --db /tmp/bench.duckdb [--width 1600] [--load 2] [--warm-browser] [--metrics]
        [--only Corpus,Compare] [--json out.json]

A page is "done" when Streamlit's script state has been notRunning for SETTLE seconds after the last run; the time is
navigation start -> the end of that last run. First visit: the first time the server renders that page (its caches
cold); second load: the same URL opened again in a new tab. Each visit opens in a fresh browser context (a new user's
browser, which downloads Streamlit's static files again); `--warm-browser`: all in one context, as one user's tabs (its
cache kept after the first page); `--reload-same-browser`: each first visit in a fresh context and its second load in
that same context (a new user opening the page, then opening it again). Two modes: idle, and `--load N` with N busy
processes beside it (a parallel CPU load of N). Targets (issue 42): idle, first ≤ 3 s, second ≤ 2 s, tab switch ≤ 1.5
s; at load 2, first ≤ 5 s, second ≤ 3 s. A figure, not a test: the machine's own load shows in it too (the script
prints the load average it ran at). Beside each time, in brackets, the CPU seconds the app's server process spent over
the same interval (its /proc stat): the work the page made the server do, which the machine's load stretches into wall
time but does not change. `--metrics` adds what the BROWSER did for each visit (on a loaded two-core machine it shares
the CPU with the server): its processes' CPU seconds (Chromium's renderer, GPU and browser processes, from /proc), the
renderer's script / layout + style time and DOM node count (CDP Performance.getMetrics), and the bytes it received over
the websocket (Streamlit's deltas) and over HTTP.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tmem.viz.navigation import PAGES  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
STATE = "document.querySelector('[data-testid=\"stApp\"]')?.getAttribute('data-test-script-state')"
SETTLE = 1.2  # s of notRunning after the last run
TABS = ("Recovered", "Forest", "Spans", "Context", "Stages", "Timeline")
TARGETS = {"idle": {"first": 3.0, "second": 2.0, "tab": 1.5}, "load": {"first": 5.0, "second": 3.0, "tab": 3.0}}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc; none elsewhere)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        out += (found := children.get(todo.pop(), []))
        todo += found
    return out


def browser_cpu() -> float:
    """CPU seconds of the Chromium processes this script started (through Playwright's driver), still alive."""
    return sum(cpu_seconds(p) for p in descendants(os.getpid())
               if Path(f"/proc/{p}/comm").exists() and "chrom" in Path(f"/proc/{p}/comm").read_text())


class Probe:
    """What the browser did for one page: its CPU, the renderer's CDP metrics, bytes received. Attach before
    navigating; `read()` after the page settled."""

    METRICS = {"ScriptDuration": "script", "LayoutDuration": "layout", "RecalcStyleDuration": "style"}

    def __init__(self, page) -> None:
        self.ws = self.http = 0
        self.requests = 0
        page.on("websocket", lambda ws: ws.on("framereceived", self._frame))
        page.on("response", self._response)
        self.cdp = page.context.new_cdp_session(page)
        self.cdp.send("Performance.enable")
        self.before, self.cpu = self._metrics(), browser_cpu()

    def _frame(self, payload) -> None:
        self.ws += len(payload)

    def _response(self, response) -> None:
        self.requests += 1
        self.http += int(response.headers.get("content-length") or 0)

    def _metrics(self) -> dict[str, float]:
        return {m["name"]: m["value"] for m in self.cdp.send("Performance.getMetrics")["metrics"]}

    def read(self) -> dict[str, float]:
        after, cpu = self._metrics(), browser_cpu()
        out = {"browser_cpu": round(cpu - self.cpu, 2)}
        out |= {short: round(after.get(k, 0) - self.before.get(k, 0), 2) for k, short in self.METRICS.items()}
        return out | {"nodes": int(after.get("Nodes", 0)), "ws_kb": round(self.ws / 1024),
                      "http_kb": round(self.http / 1024), "requests": self.requests}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([sys.executable, "-m", "tmem", "app", "--", "--server.headless", "true",
                             "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"],
                            cwd=ROOT, env={**os.environ, "TMEM_DB": str(db), "TMEM_DEMO_BATCH": "off"},
                            stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(url + "/_stcore/health", timeout=2).status == 200:
                return proc, url
        except OSError:
            time.sleep(0.25)
    proc.terminate()
    raise SystemExit(f"the app did not become healthy; see {log}")


def start_load(n: int) -> list[subprocess.Popen]:
    """`n` busy processes (a pure-Python loop each, default priority): the machine at a CPU load of about n."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def settled(page, started: float, timeout: float = 120.0) -> float:
    """Seconds from `started` to the end of the page's last script run."""
    seen_run, quiet_since, end = False, None, None
    deadline = started + timeout
    while time.perf_counter() < deadline:
        state = page.evaluate(STATE)
        now = time.perf_counter()
        if state == "running":
            seen_run, quiet_since = True, None
        elif state == "notRunning":
            if quiet_since is None:
                quiet_since = now
            if (seen_run or now - started > 3) and now - quiet_since >= SETTLE:
                end = quiet_since
                break
        page.wait_for_timeout(40)
    return round((end or time.perf_counter()) - started, 2)


def visit(browser, url: str, width: int, server: int, metrics: bool = False) -> tuple[float, float, object, dict]:
    """(seconds to the end of the page's last run, the server's CPU seconds meanwhile, the open page, what the
    browser did if `metrics`). `browser` is a Browser (each page in a fresh context: a new user's browser, no HTTP
    cache) or a BrowserContext (one user's browser: Streamlit's static files cached after the first page)."""
    viewport = {"width": width, "height": 1200}  # a shared context has its own (main)
    page = browser.new_page(viewport=viewport) if hasattr(browser, "new_context") else browser.new_page()
    probe = Probe(page) if metrics else None
    cpu, started = cpu_seconds(server), time.perf_counter()
    page.goto(url, wait_until="commit")
    seconds, server_cpu = settled(page, started), round(cpu_seconds(server) - cpu, 2)
    return seconds, server_cpu, page, probe.read() if probe else {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--width", type=int, default=1600)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--query", default="", help="extra query string for every page, e.g. corpus=demo")
    parser.add_argument("--load", type=int, default=0, help="busy processes running beside it (0: idle)")
    parser.add_argument("--warm-browser", action="store_true",
                        help="every visit in one browser context (one user's browser, its HTTP cache kept), not a "
                             "fresh one per visit: a fresh context downloads Streamlit's ~130 static files again, "
                             "~0.3 s of the server's CPU per visit that a returning user's tab does not cost")
    parser.add_argument("--reload-same-browser", action="store_true",
                        help="each page's first visit in a fresh browser context (cold cache) and its second load in "
                             "that same context (the same user opening it again, Streamlit's static files cached)")
    parser.add_argument("--metrics", action="store_true",
                        help="also what the browser did per visit: its CPU seconds, script / layout / style time, DOM "
                             "nodes, KB over the websocket and over HTTP")
    parser.add_argument("--only", default="", help="comma-separated page titles (default: every page)")
    args = parser.parse_args(argv)
    only = {t.strip() for t in args.only.split(",") if t.strip()}
    from playwright.sync_api import sync_playwright

    log = Path("/tmp") / f"bench-pages-{os.getpid()}.log"
    print(f"load average at the start {os.getloadavg()[0]:.1f}", flush=True)
    burners = start_load(args.load)
    proc, url = start_server(args.db, log)
    rows = []
    try:
        with sync_playwright() as pw:
            chromium = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            browser = (chromium.new_context(viewport={"width": args.width, "height": 1200}) if args.warm_browser
                       else chromium)
            suffix = f"?{args.query}" if args.query else ""
            for _path, title, slug, default in PAGES:
                if only and title not in only:
                    continue
                target = f"{url}/{'' if default else slug}{suffix}"
                # --reload-same-browser: a fresh context per page, both visits in it (Browser.new_page's own
                # context takes no second page)
                own = (chromium.new_context(viewport={"width": args.width, "height": 1200})
                       if args.reload_same_browser and not args.warm_browser else None)
                first, first_cpu, page, first_probe = visit(own or browser, target, args.width, proc.pid, args.metrics)
                page.close()
                second, second_cpu, page, second_probe = visit(own or browser, target, args.width, proc.pid,
                                                               args.metrics)
                row = {"page": title, "first": first, "second": second, "cpu": {"first": first_cpu,
                                                                                 "second": second_cpu}}
                if args.metrics:
                    row["browser"] = {"first": first_probe, "second": second_probe}
                if title == "Question":
                    for tab in TABS:
                        cpu, started = cpu_seconds(proc.pid), time.perf_counter()
                        page.get_by_role("tab", name=tab).click()
                        row[f"tab {tab}"] = settled(page, started)
                        row["cpu"][tab] = round(cpu_seconds(proc.pid) - cpu, 2)
                page.close()
                if own is not None:
                    own.close()
                rows.append(row)
                print(f"{title:<12} first {first:5.2f} s [{first_cpu:.2f}]  second {second:5.2f} s [{second_cpu:.2f}]"
                      + "".join(f"  {k[4:]} {v:.2f} [{row['cpu'][k[4:]]:.2f}]" for k, v in row.items()
                                if k.startswith("tab ")), flush=True)
                for visit_name, probe in row.get("browser", {}).items():
                    print(f"{'':<12} {visit_name:<6} browser " + " ".join(f"{k} {v}" for k, v in probe.items()),
                          flush=True)
            chromium.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for burner in burners:
            burner.terminate()
    worst = {"first": max(r["first"] for r in rows), "second": max(r["second"] for r in rows),
             "tab": max([v for r in rows for k, v in r.items() if k.startswith("tab ")] or [0.0])}
    targets = TARGETS["load" if args.load else "idle"]
    print(f"mode: {'parallel CPU load ' + str(args.load) if args.load else 'idle'}"
          f"{'; one browser context (warm cache)' if args.warm_browser else ''}"
          f"{'; second load in the first visit`s browser' if args.reload_same_browser else ''}"
          "; load average at the end "
          f"{os.getloadavg()[0]:.1f}; [server CPU seconds]")
    print("worst: " + ", ".join(f"{k} {v:.2f} s (target ≤ {targets[k]:g} s)" for k, v in worst.items()))
    if args.json:
        args.json.write_text(json.dumps({"width": args.width, "load": args.load, "warm_browser": args.warm_browser,
                                         "reload_same_browser": args.reload_same_browser,
                                         "rows": rows, "worst": worst},
                                        indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
