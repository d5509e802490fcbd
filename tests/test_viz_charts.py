"""tmem.viz.charts: the legend-over-SVG frame the Corpus, Compare and Recall charts share (their own tests check
what they draw inside it)."""
from __future__ import annotations

from tmem.viz.charts import legend_and_svg, swatch


def test_a_swatch_is_a_box_of_its_colour_and_size_beside_its_label():
    assert swatch("#123456", "full") == (
        '<span style="white-space:nowrap"><span style="display:inline-block;width:11px;height:11px;'
        'background:#123456;margin-right:4px"></span>full</span>')
    line = swatch("#abc", "bm25", 14, 3, "vertical-align:middle;")
    assert "width:14px;height:3px;background:#abc;vertical-align:middle;margin-right:4px" in line


def test_the_legend_comes_first_then_one_svg_of_the_body_in_order_on_one_line():
    html = legend_and_svg("<b>L</b>", ['<line x1="0"/>', "<text>a</text>"], 120, "messages per period", 6.0)
    assert "\n" not in html  # st.markdown keeps one line one raw HTML block
    assert html.index("<b>L</b>") < html.index("<svg") < html.index('<line x1="0"/><text>a</text>') < html.index(
        "</svg>")
    assert 'margin-left:6.0%' in html and 'height="120"' in html and 'aria-label="messages per period"' in html
    assert html.endswith("</svg>") and html.count("<svg") == 1
