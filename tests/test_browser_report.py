"""The static run report (`python -m tmem report`) opened from disk in Debian's Chromium: it loads nothing but its
own files, runs no script (the payload corpus stays text), its links work from a file:// URL, and it fits at
1100 and 1600 px (screenshots in test-artifacts/)."""
from __future__ import annotations

import json

import pytest
from test_browser import ARTIFACTS, CHROMIUM, browser, chromium  # noqa: F401 (fixtures)

from tmem.cli import main as cli

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")]
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """(mini demo report folder, payload corpus report folder)."""
    from conftest import evil_corpus

    from tmem.demo import generate
    from tmem.store import Store

    root = tmp_path_factory.mktemp("report")
    db = root / "r.duckdb"
    store = Store(db)
    store.replace_corpus("mini", generate(7, 600, 1), format="demo")
    store.replace_corpus("evil", evil_corpus(), format="test")
    store.close()
    out = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TMEM_EMBEDDER", "lexical")
        for corpus in ("mini", "evil"):
            assert cli(["run", "--db", str(db), "--corpus", corpus, "--variants", "full,flat", "--out",
                        str(root / f"run-{corpus}"), "--offline", "--quiet"]) == 0
            run_id = json.loads((root / f"run-{corpus}" / "run.json").read_text())["run_id"]
            assert cli(["annotate", "--db", str(db), "--run", run_id, "--question", "q1" if corpus == "evil" else
                        "knowledge_update_1", "--variant", "flat", "--label", "gold wrong", "--note",
                        "<script>window.top.__pwned=7</script> a note", "--author", "ana"]) == 0
            assert cli(["report", "--db", str(db), "--run", run_id, "--out", str(root / f"site-{corpus}")]) == 0
            out[corpus] = root / f"site-{corpus}"
    return out["mini"], out["evil"]


def _page(browser, width: int, requests: list[str], dialogs: list[str]):  # noqa: F811
    page = browser.new_page(viewport={"width": width, "height": 1000})
    page.on("request", lambda r: requests.append(r.url))
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    return page


def test_the_report_opens_from_disk_and_its_links_work(browser, reports):  # noqa: F811
    mini, _ = reports
    requests, dialogs = [], []
    page = _page(browser, 1600, requests, dialogs)
    page.goto((mini / "index.html").as_uri())
    assert page.title().startswith("T-Mem run")
    assert page.locator("h2#comparisons").is_visible() and page.locator("svg").count() >= 3
    assert "offline stand-in" in page.inner_text(".stand-in")
    roles = next(line for line in page.inner_text("body").splitlines() if line.startswith("roles:"))
    assert "answer: offline:extractive-answerer" in roles and "|" not in roles, "roles in words (issue 42)"
    assert page.locator("td.win, td.loss, td.inconclusive").count() >= 3
    page.screenshot(path=str(ARTIFACTS / "report-index-1600.png"), full_page=True)
    page.locator("a[href^='q/full__']", has_text="knowledge_update_1").click()
    page.wait_for_load_state()
    assert "Review" in page.inner_text("body")
    assert page.locator("svg[aria-label='anchor timeline']").count() == 1
    assert page.locator("svg[aria-label^='evidence forest']").count() == 1
    page.screenshot(path=str(ARTIFACTS / "report-question-1600.png"), full_page=False)
    page.locator("a[href='../index.html']").first.click()
    page.wait_for_load_state()
    assert page.url.endswith("/index.html")
    assert all(u.startswith("file://") for u in requests), [u for u in requests if not u.startswith("file://")]
    assert not dialogs


def test_the_report_fits_at_1100_px(browser, reports):  # noqa: F811
    mini, _ = reports
    requests, dialogs = [], []
    page = _page(browser, 1100, requests, dialogs)
    page.goto((mini / "index.html").as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= 1100
    page.screenshot(path=str(ARTIFACTS / "report-index-1100.png"), full_page=True)
    page.locator("a[href^='q/flat__']", has_text="knowledge_update_1").click()
    page.wait_for_load_state()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1100  # the forest scrolls in its own box
    assert "gold wrong" in page.inner_text("body")
    page.screenshot(path=str(ARTIFACTS / "report-question-1100.png"), full_page=False)


def test_payloads_in_the_report_stay_text(browser, reports):  # noqa: F811
    _, evil = reports
    requests, dialogs = [], []
    page = _page(browser, 1400, requests, dialogs)
    pages = [evil / "index.html", *sorted((evil / "q").glob("*.html"))]
    assert len(pages) == 3  # q1 under full and flat
    for path in pages:
        page.goto(path.as_uri())
        assert page.evaluate("window.__pwned") is None and "PWNED" not in page.title()
        assert page.locator("script").count() == 0
    page.goto((evil / "index.html").as_uri())
    assert "<script>window.top.__pwned=7</script> a note" in page.inner_text("body")  # the note, shown as text
    assert all(u.startswith("file://") for u in requests), [u for u in requests if not u.startswith("file://")]
    assert not dialogs
