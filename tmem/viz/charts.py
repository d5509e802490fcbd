"""The frame of the charts the pages draw as SVG in the page instead of plotly (docs/app.md, "Browser work per
page"): a legend of colour swatches above an SVG as wide as the page. Horizontal positions inside are % of the
width and vertical ones px, so the text keeps its size at any width; the result is one line, so st.markdown keeps
it one raw HTML block. Callers escape every text from the data before it reaches these."""
from __future__ import annotations

from collections.abc import Sequence


def swatch(colour: str, label: str, width: int = 11, height: int = 11, style: str = "") -> str:
    """A legend entry: a `width` x `height` px box of `colour` and the (escaped) `label` beside it."""
    return (f'<span style="white-space:nowrap"><span style="display:inline-block;width:{width}px;height:{height}px;'
            f'background:{colour};{style}margin-right:4px"></span>{label}</span>')


def legend_and_svg(legend: str, body: Sequence[str], height: int, label: str, left: float) -> str:
    """The legend's entries in a wrapping row from `left` % of the width, then the SVG of `body` (its elements),
    `height` px high, named `label` (escaped) for screen readers and tests."""
    return (f'<div style="font-family:sans-serif;font-size:12px;color:#333;display:flex;flex-wrap:wrap;'
            f'column-gap:18px;margin-left:{left}%">{legend}</div>'
            f'<svg xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{label}" width="100%" '
            f'height="{height}" style="font-family:sans-serif;display:block">' + "".join(body) + "</svg>")
