"""Charts drawn in the page, not by plotly, in a real browser (Playwright driving Debian's /usr/bin/chromium against
the app as a subprocess on 127.0.0.1, helpers of tests/test_browser.py): what the Corpus, Compare and Recall pages
cost the browser (issue 42 item 9). Their charts are SVG and an HTML table shown through st.markdown (st.html's
sanitiser drops SVG whole, which AppTest cannot see); no plotly bundle is fetched for them; Corpus' message table
sends one page of rows, not the scope's 3,000."""
from __future__ import annotations

import re
import shutil
from contextlib import contextmanager

import pytest
from conftest import APP_RUN_ID
from test_browser import ARTIFACTS, CHROMIUM, _page, _settle, browser, chromium, serving  # noqa: F401 (fixture)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

TITLES = "sel => [...document.querySelectorAll(sel)].map(e => e.title || e.textContent)"


def _drawn(page, selector: str) -> None:
    """The page settled AND the chart drawn: a loaded machine can leave the idle marker visible before the first
    run starts (the Recall test once read 0 points), so wait for the chart itself."""
    page.locator(f'[data-testid="stMain"] {selector}').first.wait_for(state="attached", timeout=240_000)
    _settle(page)


@pytest.fixture(scope="module")
def server(app_template_db, tmp_path_factory):
    """One app server for the module's tests (they only read): a copy of the prepared database, lexical embedder."""
    db = tmp_path_factory.mktemp("charts") / "app.duckdb"
    shutil.copy(app_template_db, db)
    with serving(db, TMEM_EMBEDDER="lexical") as running:
        yield running


@contextmanager
def _chart_page(browser, server, path: str, chart: str):  # noqa: F811
    """A new page (its own browser context and app session) on `path`, once `chart` (a selector) is drawn: (page,
    URLs fetched, sizes of the websocket frames received). No request leaves 127.0.0.1 (checked on exit)."""
    blocked: list[str] = []
    fetched: list[str] = []
    received: list[int] = []
    page = _page(browser, blocked, height=1400)
    page.on("request", lambda r: fetched.append(r.url))
    page.on("websocket", lambda ws: ws.on("framereceived", lambda payload: received.append(len(payload))))
    page.goto(server.url + path)
    _drawn(page, chart)
    yield page, fetched, received
    assert not blocked


BARS = """() => [...document.querySelectorAll('svg[aria-label="messages per period"] rect title')]
    .map(t => t.textContent)"""


def test_corpus_page_draws_its_chart_without_plotly_and_sends_one_page_of_messages(browser, server):  # noqa: F811
    with _chart_page(browser, server, "/corpus", 'svg[aria-label="messages per period"] rect title') as (
            page, fetched, received):
        # the scope's total from the line that states it ("Scope X — 3,000 messages, …"): the first "messages" and a
        # number in the page's text once came from the chart's own axis ("messages", tick "0") in a CI run
        page.get_by_text(re.compile(r"of [\d,]+ messages; rows")).wait_for(timeout=240_000)
        main = page.inner_text('[data-testid="stMain"]')
        total = int(re.search(r"— ([\d,]+) messages, ", main).group(1).replace(",", ""))
        assert total > 1000, "the demo scope (else this test checks nothing)"
        bars = page.evaluate(BARS)
        assert bars and sum(int(re.search(r": (\d+) messages$", b).group(1)) for b in bars) == total, \
            "every message counted once in the chart's bars"
        assert not [u for u in fetched if "PlotlyChart" in u], "no plotly bundle for the Corpus page"
        assert f"{total:,} of {total:,} messages; rows 1–200 shown" in main
        # the whole table was 730 KB of the page's websocket traffic; one page of 200 rows and the rest ~80 KB
        assert sum(received) < 300_000, f"{sum(received):,} bytes over the websocket"
        page.screenshot(path=str(ARTIFACTS / "corpus.png"))


def test_compare_page_draws_whiskers_bars_and_the_question_table_without_plotly(browser, server):  # noqa: F811
    """The golden run: one question both variants answered, flat without its evidence and full with it."""
    main = '[data-testid="stMain"] '
    with _chart_page(browser, server, f"/compare?corpus=golden&run={APP_RUN_ID}&baseline=flat",
                     'svg[aria-label="paired deltas with intervals"] circle') as (page, fetched, _):
        assert page.locator(main + 'svg[aria-label="paired deltas with intervals"] circle').count() >= 1
        bars = page.evaluate(TITLES, main + 'svg[aria-label$="per question type"] rect title')
        assert "all · full: 100.0%" in bars and "all · flat: 0.0%" in bars
        cells = [t.split(": ")[-1] for t in page.evaluate(TITLES, main + 'table[aria-label="question by variant"] '
                                                                      "td[title]")]
        assert cells == ["none", "complete"], "flat without its evidence, full with it"
        assert not [u for u in fetched if "PlotlyChart" in u], "no plotly bundle for the Compare page"
        page.screenshot(path=str(ARTIFACTS / "compare-charts.png"))


def test_recall_page_draws_its_curve_without_plotly(browser, server):  # noqa: F811
    """The shipped demo recall file (data/recall/demo.json): a point per method and budget, R'(q) a star."""
    from tmem.viz.batch import recall_curve

    demo = recall_curve.RECALL_DIR / "demo.json"
    if not demo.exists():
        pytest.skip("no shipped demo recall file")
    run = recall_curve.load(demo)["runs"][0]
    expected = sum(len(points) for points in run["budget"]["splits"]["all"]["curve"].values())
    curve = 'svg[aria-label="recall against messages"] circle title'
    with _chart_page(browser, server, f"/recall?recall_file=demo.json&recall_k={run['k']}", curve) as (
            page, fetched, _):
        points = page.evaluate(TITLES, '[data-testid="stMain"] ' + curve)
        assert len(points) == expected and all(" · budget " in p for p in points)
        assert not [u for u in fetched if "PlotlyChart" in u], "no plotly bundle for the Recall page"
