"""The explorer at 1100 px (a narrow window) in a real browser: no label or button cut
to an ellipsis, the forest's zoom buttons on one line, the timeline's band labels apart. Playwright driving Debian's
/usr/bin/chromium against the app as a subprocess on 127.0.0.1 (helpers of tests/test_browser.py); screenshots
go to test-artifacts/."""
from __future__ import annotations

import pytest
from test_browser import ARTIFACTS, CHROMIUM, Server, _forest, _page, _settle, browser  # noqa: F401 (fixture)

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


def test_nothing_is_cut_at_1100_px(browser, app_db):  # noqa: F811
    server = Server(app_db, TMEM_EMBEDDER="lexical")
    blocked: list[str] = []
    try:
        page = _page(browser, blocked, height=1000)
        page.set_viewport_size({"width": 1100, "height": 1000})
        page.goto(server.url + "/")  # the curated demo question: answers, funnel, timeline
        _settle(page)
        assert page.evaluate(CUT) == [], "funnel labels and buttons whole (once 'gold evidenc…', 'C…', 'J…')"
        labels = page.evaluate(LABELS)
        assert len(labels) >= 3 and _overlaps(labels) == [], "band labels apart (once 'C2C3')"
        page.screenshot(path=str(ARTIFACTS / "layout-1100-question.png"))

        frame = _forest(page)
        page.wait_for_timeout(800)
        heights = frame.locator("#forest-toolbar button").evaluate_all("bs => bs.map(b => b.offsetHeight)")
        assert len(heights) == 4 and max(heights) < 30, f"zoom buttons on one line (once three): {heights}"
        assert page.evaluate(CUT) == []
        page.screenshot(path=str(ARTIFACTS / "layout-1100-forest.png"))
    finally:
        server.stop()
    assert not blocked
