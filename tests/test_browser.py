"""Real-browser tests of the explorer: Playwright (sync API) driving Debian's /usr/bin/chromium against the app
started as a subprocess on 127.0.0.1; every request to any other host is aborted.

- quick start: no database -> the demo corpus loads, the curated question opens with its answer; the timeline and
  the forest canvas are drawn, the forest's node count in the DOM equals the stored trace's; switching the variant
  and running it; Compare, Corpus, Failures and Settings render. Time to first paint is measured.
- payloads: a corpus whose text, authors, topics, channels, question and gold answer carry script and href
  payloads; opening it by deep link (the server's first session), running it, hovering every forest node and
  visiting the other pages must never execute them (canary: window.__pwned and document.title, in every frame).

Screenshots and timings go to test-artifacts/ (gitignored).
"""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
IDLE = '[data-testid="stApp"][data-test-script-state="notRunning"]'
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                                 "(apt-get install -y chromium); Playwright's own browser download is not used")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`streamlit run app.py` on a free port of 127.0.0.1, stopped by its PID."""

    def __init__(self, db: Path, **env: str):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(ARTIFACTS / f"server-{db.stem}.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true", "--server.port",
             str(self.port), "--server.address", "127.0.0.1", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"], cwd=ROOT, env={**os.environ, "TMEM_DB": str(db), **env},
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(self.url + "/_stcore/health", timeout=2).status == 200:
                    return
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise RuntimeError("the app did not become healthy")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.close()


@pytest.fixture
def browser():
    ARTIFACTS.mkdir(exist_ok=True)
    with sync_api.sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


def _page(browser, blocked: list[str], height: int = 2600):
    page = browser.new_page(viewport={"width": 1440, "height": height})

    def route(r):
        if re.match(r"^(https?|wss?)://127\.0\.0\.1[:/]", r.request.url) or r.request.url.startswith(
                ("data:", "blob:", "about:")):
            return r.continue_()
        blocked.append(r.request.url)
        return r.abort()
    page.route("**/*", route)
    return page


def _settle(page, timeout: float = 240_000) -> None:
    page.wait_for_timeout(600)
    page.wait_for_selector(IDLE, timeout=timeout)
    page.wait_for_timeout(900)


def _forest(page):
    frame = page.frame_locator("iframe").first
    frame.locator("#mynetwork canvas").wait_for(timeout=240_000)
    return frame


def _dom_node_count(page) -> tuple[int, int]:
    """(data-node-count of the forest page, nodes in its vis DataSet)."""
    frame = _forest(page)
    declared = int(frame.locator("#mynetwork").get_attribute("data-node-count"))
    drawn = next(f for f in page.frames if f != page.main_frame and f.evaluate("typeof nodes") == "object")
    return declared, drawn.evaluate("nodes.length")


def _fcp(page) -> float:
    """First contentful paint of the page, in seconds after navigation start."""
    page.wait_for_function("performance.getEntriesByName('first-contentful-paint').length > 0", timeout=60_000)
    return round(page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime") / 1000, 3)


def _sidebar_link(page, name: str) -> None:
    page.locator(f'[data-testid="stSidebarNav"] a[href$="/{name}"]').click()
    _settle(page)


def test_quick_start_question_variant_and_compare(browser, tmp_path):
    db = tmp_path / "quickstart.duckdb"  # does not exist: the first start loads the demo corpus
    server = Server(db)
    blocked: list[str] = []
    timings: dict[str, float] = {}
    try:
        page = _page(browser, blocked)
        start = time.time()
        page.goto(server.url + "/")
        page.wait_for_selector('[data-testid="stSidebar"]', timeout=120_000)
        timings["first_contentful_paint_s"] = _fcp(page)
        timings["sidebar_visible_s"] = time.time() - start
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=300_000)
        timings["timeline_visible_s"] = time.time() - start
        declared, drawn = _dom_node_count(page)
        timings["forest_visible_s"] = time.time() - start
        _settle(page)
        assert declared == drawn > 0
        assert f"Forest: {declared} nodes" in page.inner_text('[data-testid="stMain"]')
        assert "offline stand-in" in page.inner_text('[data-testid="stMain"]')
        assert "q=" in page.url
        page.screenshot(path=str(ARTIFACTS / "question.png"))
        page.locator("iframe").first.screenshot(path=str(ARTIFACTS / "question-forest.png"))

        sidebar_variant = page.locator('[data-testid="stSidebar"] [data-testid="stSelectbox"]').nth(2)
        sidebar_variant.click()
        page.get_by_role("option", name="no-compression", exact=True).click()
        _settle(page)
        assert "variant=no-compression" in page.url
        page.locator("button", has_text="Run the pipeline").click()
        _settle(page)
        other_declared, other_drawn = _dom_node_count(page)
        assert other_declared == other_drawn > 0
        page.screenshot(path=str(ARTIFACTS / "question-no-compression.png"))

        warm = _page(browser, blocked)  # a second visit: the stored trace is loaded, nothing is re-run
        start = time.time()
        warm.goto(server.url + "/?" + page.url.split("?", 1)[1].replace("no-compression", "full"))
        warm.wait_for_selector(".js-plotly-plot .main-svg", timeout=120_000)
        timings["warm_first_contentful_paint_s"] = _fcp(warm)
        timings["warm_timeline_visible_s"] = time.time() - start
        assert _dom_node_count(warm)[0] == declared
        timings["warm_forest_visible_s"] = time.time() - start
        warm.close()

        _sidebar_link(page, "compare")
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        assert "Accuracy and recall per question type" in page.inner_text('[data-testid="stMain"]')
        page.screenshot(path=str(ARTIFACTS / "compare.png"))
        for name in ("corpus", "failures", "settings"):
            _sidebar_link(page, name)
            assert not page.locator('[data-testid="stException"]').count()
            page.screenshot(path=str(ARTIFACTS / f"{name}.png"))
        _sidebar_link(page, "failures")  # a row opens the Question view
        grid = page.locator('[data-testid="stDataFrame"]').first.bounding_box()
        page.mouse.click(grid["x"] + 18, grid["y"] + 35 + 17)
        _settle(page)
        page.wait_for_selector(".js-plotly-plot .main-svg", timeout=60_000)
        assert "q=knowledge_update_1" in page.url and "Answers" in page.inner_text('[data-testid="stMain"]')
        assert not page.locator('[data-testid="stException"]').count()
    finally:
        server.stop()
    (ARTIFACTS / "browser-timings.json").write_text(json.dumps({k: round(v, 2) for k, v in timings.items()},
                                                              indent=1))
    assert not blocked, f"requests outside 127.0.0.1: {blocked[:5]}"

    from tmem.store import Store

    store = Store(db)
    index = store.trace_index("demo")
    counts = {}
    for r in index.itertuples():
        trace = store.load_trace("demo", r.scope, r.question_id, r.variant, r.config_hash, r.backend)
        counts[r.variant] = len(trace.nodes)
    store.close()
    assert counts == {"full": declared, "no-compression": other_declared}


CANARY = """() => { try { return [window.__pwned ?? null, document.title]; } catch (e) { return ["blocked", ""]; } }"""


def _canaries(page) -> list:
    return [f.evaluate(CANARY) for f in page.frames]


def test_payloads_never_execute(browser, tmp_path):
    from conftest import evil_corpus

    from tmem.store import open_store

    db = tmp_path / "payloads.duckdb"
    store = open_store(db, ensure_demo=False)
    store.replace_corpus("evil", evil_corpus(), format="test")
    store.close()
    server = Server(db, TMEM_EMBEDDER="lexical")
    blocked: list[str] = []
    dialogs: list[str] = []
    try:
        page = _page(browser, blocked)
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        # a deep link is the server's first session: the page must still get its shell and sidebar
        page.goto(server.url + "/question?corpus=evil&scope=golden&q=q1&variant=full")
        _settle(page)
        assert page.locator('[data-testid="stSidebar"]').count()
        page.locator("button", has_text="Run the pipeline").click()
        _settle(page)
        frame = _forest(page)
        declared, drawn = _dom_node_count(page)
        assert declared == drawn > 0
        vis = next(f for f in page.frames if f != page.main_frame and f.evaluate("typeof nodes") == "object")
        points = vis.evaluate("""() => { const p = network.getPositions(); return Object.keys(p).map(
            id => network.canvasToDOM(p[id])); }""")
        canvas, shown = frame.locator("#mynetwork canvas"), []
        for point in points:
            canvas.hover(position={"x": point["x"], "y": point["y"]}, force=True)
            page.wait_for_timeout(150)
            tip = frame.locator("div.vis-tooltip")
            if tip.count() and tip.first.is_visible():
                shown.append(tip.first.inner_text())
        assert any("img src=x" in t or "script" in t for t in shown), "tooltips show payloads as text"
        page.screenshot(path=str(ARTIFACTS / "payload-question.png"))
        page.locator("iframe").first.screenshot(path=str(ARTIFACTS / "payload-forest-tooltip.png"))
        canaries = _canaries(page)
        for name in ("failures", "compare", "settings", "corpus"):
            _sidebar_link(page, name)
            canaries += _canaries(page)
        page.screenshot(path=str(ARTIFACTS / "payload-corpus.png"))
    finally:
        server.stop()
    assert not dialogs
    assert all(c[0] in (None, "blocked") for c in canaries), canaries
    assert not any("PWNED" in (c[1] or "") for c in canaries), canaries
    assert not blocked, f"requests outside 127.0.0.1: {blocked[:5]}"
