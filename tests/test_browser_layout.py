"""The explorer at 1100 px (a narrow window) in a real browser: no label or button cut
to an ellipsis, the forest's zoom buttons on one line, the timeline's band labels apart. Playwright driving Debian's
/usr/bin/chromium against the app as a subprocess on 127.0.0.1 (helpers of tests/test_browser.py); screenshots
go to test-artifacts/."""
from __future__ import annotations

import shutil
from contextlib import contextmanager

import pytest
from test_browser import ARTIFACTS, CHROMIUM, _forest, _page, _settle, browser, chromium, serving  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

# Text Streamlit cut to "…" in the main column; a select box may cut a long question, a data grid draws on a canvas.
CUT = """() => [...document.querySelectorAll('[data-testid="stMain"] *')].filter(e =>
    getComputedStyle(e).textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth + 1 && e.innerText.trim()
    && !e.closest('[data-baseweb="select"]') && !e.closest('[data-testid="stDataFrame"]')).map(e => e.innerText)"""
LABELS = """() => [...document.querySelectorAll('.annotation-text')].filter(t => /^C\\d+$/.test(t.textContent))
    .map(t => { const r = t.getBoundingClientRect(); return [t.textContent, r.left, r.right, r.top, r.bottom]; })"""


def _overlaps(boxes):
    return [(a[0], b[0]) for i, a in enumerate(boxes) for b in boxes[i + 1:]
            if a[1] < b[2] and b[1] < a[2] and a[3] < b[4] and b[3] < a[4]]


@pytest.fixture(scope="module")
def server(app_template_db, tmp_path_factory):
    """One app server for the module's tests: a copy of the prepared database with the structuring test's case
    corpus added (tests/test_app_structuring.py: gold edges and one stored trace), lexical embedder."""
    from test_app_structuring import _case_corpus

    folder = tmp_path_factory.mktemp("layout")
    db = folder / "app.duckdb"
    shutil.copy(app_template_db, db)
    with pytest.MonkeyPatch.context() as mp:  # the settings app_db gives a test
        mp.setenv("TMEM_DB", str(db))
        mp.setenv("TMEM_EMBEDDER", "lexical")
        _case_corpus(db, folder)
    with serving(db, TMEM_EMBEDDER="lexical") as running:
        yield running


@contextmanager
def _page_at_1100(browser, server):  # noqa: F811
    """A new page 1100 px wide (its own browser context and app session); afterwards, no request left 127.0.0.1."""
    blocked: list[str] = []
    page = _page(browser, blocked, height=1000)
    page.set_viewport_size({"width": 1100, "height": 1000})
    yield server, page
    assert not blocked


def _timeline_drawn(page, timeout: float = 120_000) -> None:
    """Plotly draws the timeline after the script's last run has ended: the browser first fetches and parses its
    4.7 MB chunk, 2.2 s after the end on a loaded machine, past what _settle waits (the test failed about 1 run in 10
    with no band label; with the renderer's CPU throttled 4x through CDP, every run). Wait for the labels."""
    try:
        page.wait_for_function(f"({LABELS})().length >= 3", timeout=timeout)
    except sync_api.TimeoutError:
        pass  # the assertion on the labels says what is missing


def test_nothing_is_cut_at_1100_px(browser, server):  # noqa: F811
    with _page_at_1100(browser, server) as (server, page):
        page.goto(server.url + "/")  # the curated demo question: answers, funnel, timeline
        _settle(page)
        _timeline_drawn(page)
        assert page.evaluate(CUT) == [], "funnel labels and buttons whole (once 'gold evidenc…', 'C…', 'J…')"
        labels = page.evaluate(LABELS)
        assert len(labels) >= 3 and _overlaps(labels) == [], "band labels apart (once 'C2C3')"
        page.screenshot(path=str(ARTIFACTS / "layout-1100-question.png"))

        frame = _forest(page)
        heights = frame.locator("#forest-toolbar button").evaluate_all("bs => bs.map(b => b.offsetHeight)")
        assert len(heights) == 4 and max(heights) < 30, f"zoom buttons on one line (once three): {heights}"
        note, canvas = frame.locator("#forest-toolbar span"), frame.locator("#mynetwork")
        assert note.evaluate("s => s.scrollHeight <= s.clientHeight + 1"), "the toolbar's note whole"
        assert note.bounding_box()["y"] + note.bounding_box()["height"] <= canvas.bounding_box()["y"] + 1, \
            "the note above the canvas (its third line once ran into it at 1100 px)"
        assert page.evaluate(CUT) == []
        page.screenshot(path=str(ARTIFACTS / "layout-1100-forest.png"))


# A select box whose chosen value is cut (its label read "key-evidence recall (Eq. 10" at 1100 px), by its label:
# Streamlit 1.67 shows the value in the box's <input>, wider inside than its box when cut.
CUT_SELECT = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stSelectbox"]')]
    .filter(box => [...box.querySelectorAll('input')].some(e => e.value && e.scrollWidth > e.clientWidth + 1))
    .map(box => box.querySelector('label').innerText)"""
# Plotly titles reaching past their chart's right edge (a title is one line: Plotly never wraps it).
CUT_TITLE = """() => [...document.querySelectorAll('[data-testid="stMain"] .js-plotly-plot')].flatMap(plot => {
    const right = plot.getBoundingClientRect().right;
    return [...plot.querySelectorAll('.gtitle')].filter(t => t.getBoundingClientRect().right > right + 1)
        .map(t => t.textContent); })"""


def test_sweep_title_and_metric_box_whole_at_1100_px(browser, server):  # noqa: F811
    """Issue 42: at 1100 px the demo's shipped sweep showed its chart title cut after "within noi" and the Metric
    box's label cut to "key-evidence recall (Eq. 10"."""
    with _page_at_1100(browser, server) as (server, page):
        page.goto(server.url + "/sweep?corpus=demo")
        _settle(page)
        page.locator(".js-plotly-plot .gtitle").first.wait_for(timeout=60_000)
        assert page.evaluate(CUT_SELECT) == [], "the Metric box shows its whole label"
        assert page.evaluate(CUT_TITLE) == [], "the chart's title ends inside the chart"
        assert page.evaluate(CUT) == []
        page.screenshot(path=str(ARTIFACTS / "layout-1100-sweep.png"))


# The columns a data grid shows whole without scrolling sideways, by header. The grid draws on a canvas; its
# accessible table lists the columns it drew, the last one possibly cut at the grid's right edge (whole only when
# the grid does not scroll sideways).
WHOLE_COLUMNS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-testid="stDataFrame"]')].map(d => {
    const s = d.querySelector('.dvn-scroller'), heads = [...d.querySelectorAll('th')].map(t => t.textContent);
    return s && s.scrollWidth > s.clientWidth + 1 ? heads.slice(0, -1) : heads; })"""


def test_structuring_confusion_and_sweep_figures_whole_at_1100_px(browser, server):  # noqa: F811
    """Issue 42, 1100 px: Structuring's confusion table clipped its last column ("UPDATE wrong parent"), and Sweep's
    cell table had to be scrolled sideways to reach evidence_complete (the figure the page leads with offline).
    The case corpus (gold edges, one stored trace) is in the module server's database."""
    with _page_at_1100(browser, server) as (server, page):
        page.goto(server.url + "/structuring?corpus=case")
        _settle(page)
        page.locator('[data-testid="stDataFrame"] th', has_text="gold").first.wait_for(state="attached", timeout=60_000)
        confusion = next(g for g in page.evaluate(WHOLE_COLUMNS) if g[:1] == ["gold"])
        assert len(confusion) == 6, f"all six columns of the confusion table whole: {confusion}"
        page.screenshot(path=str(ARTIFACTS / "layout-1100-structuring.png"))

        page.goto(server.url + "/sweep?corpus=demo")
        _settle(page)
        heads = page.locator('[data-testid="stDataFrame"] th', has_text="paper default")
        heads.wait_for(state="attached", timeout=60_000)
        cells = next(g for g in page.evaluate(WHOLE_COLUMNS) if g[:1] == ["paper default"])
        assert {"recall", "evidence_complete"} <= set(cells), f"the cell table's figures whole: {cells}"


# A multiselect's chosen values (chips) cut to "c…": CUT leaves select boxes out, for their long questions.
CUT_CHIPS = """() => [...document.querySelectorAll('[data-testid="stMain"] [data-baseweb="tag"] span')]
    .filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.innerText)"""
PARAM_INPUTS = """() => document.querySelectorAll('[data-testid="stMain"] [class*="st-key-p-"]').length"""


def test_settings_buttons_whole_and_parameter_form_built_when_opened_at_1100_px(browser, server):  # noqa: F811
    """Issue 42: at 1100 px Settings cut its endpoint buttons to "Apply to…" and "Test …"; and its 40-input parameter
    form was most of the page's DOM on every visit. Closed, the form's expander holds no input; opened, all 40, and
    the URL says so (a link opens it)."""
    from tmem.config import field_help

    with _page_at_1100(browser, server) as (server, page):
        page.goto(server.url + "/settings")
        _settle(page)
        page.get_by_role("button", name="Test endpoint").wait_for(timeout=60_000)
        assert page.evaluate(CUT) == [], "the endpoint buttons whole"
        assert page.evaluate(PARAM_INPUTS) == 0, "no parameter input while the form is closed"
        page.screenshot(path=str(ARTIFACTS / "layout-1100-settings.png"))
        page.get_by_text("Change parameters").click()
        page.get_by_role("button", name="Apply parameters").wait_for(timeout=60_000)
        _settle(page)
        assert page.evaluate(PARAM_INPUTS) == len(field_help())
        assert "edit=true" in page.url
        # opened, at 1100 px: four equal columns cut "query_includes_user" to "query_inclu…" and metadata_fields'
        # chips to "c…" (noticed in issue 42's note); fields that wrap keep both whole
        assert page.evaluate(CUT) == [], "every parameter label whole"
        assert page.evaluate(CUT_CHIPS) == [], "every chip of a list parameter whole"
        page.screenshot(path=str(ARTIFACTS / "layout-1100-settings-form.png"), full_page=True)
