"""tmem.viz.safe: escaping rules for HTML, plotly labels, vis-network tooltips and Markdown."""
from __future__ import annotations

import pytest
from conftest import PAYLOADS

from tmem.viz.safe import esc, md, plain_title, shorten


@pytest.mark.parametrize("payload", PAYLOADS)
def test_esc_leaves_no_markup(payload):
    out = esc(payload)
    assert "<" not in out and ">" not in out and '"' not in out


def test_esc_none_is_empty():
    assert esc(None) == ""


@pytest.mark.parametrize("text", ["see href=x", "HREF", "a Href b", "<a href='javascript:x'>y</a>"])
def test_plain_title_never_contains_href(text):
    out = plain_title(text)
    assert "href" not in out.lower()
    assert "<" not in out and ">" not in out


def test_plain_title_bounds_length():
    assert len(plain_title("x" * 5000, limit=100)) == 101


def test_md_escapes_link_syntax():
    out = md("[link](javascript:alert(1)) *bold* <b>")
    assert "\\[" in out and "\\(" in out and "\\*" in out and "\\<" in out


def test_shorten_flattens_and_cuts():
    assert shorten("a\n b   c", 10) == "a b c"
    assert shorten("x" * 50, 10).endswith("…") and len(shorten("x" * 50, 10)) == 10


def test_spreadsheet_safe_keeps_formulas_as_text_and_numbers_as_numbers():
    import pandas as pd

    from tmem.viz.safe import spreadsheet_safe

    frame = pd.DataFrame({"note": ["=1+1", " +cmd|' /C calc'!A0", "-2", "@SUM(A1)", "\t=x", "plain", None],
                          "n": [-1, 2, 3, 4, 5, 6, 7]})
    safe = spreadsheet_safe(frame)
    assert list(safe["note"])[:6] == ["'=1+1", "' +cmd|' /C calc'!A0", "'-2", "'@SUM(A1)", "'\t=x", "plain"]
    assert pd.isna(safe["note"].iloc[6]) and safe["note"].dtype == frame["note"].dtype
    assert list(safe["n"]) == [-1, 2, 3, 4, 5, 6, 7] and list(frame["note"])[0] == "=1+1"  # a copy
