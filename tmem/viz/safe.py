"""Escaping for untrusted text (message text, author, topic, channel, answers) in every HTML the app produces.

Three targets, three rules:
- real HTML (span markup, the report, the forest legend): `esc` (html.escape with quotes);
- plotly hover/tick labels, which plotly renders as a small HTML subset (`<a href>`, `<b>`, `<br>`): `esc` too —
  plotly shows the entities as the original characters, as text;
- vis-network tooltips (pyvis node titles), shown as plain text by vis-network *unless* any title contains "href",
  which makes pyvis switch every tooltip to innerHTML: `plain_title` breaks "href" and angle brackets so that
  switch can never happen and nothing could parse as a tag even if it did.
"""
from __future__ import annotations

import html
import re

import pandas as pd

_HREF = re.compile(r"h(?=ref)", re.IGNORECASE)
# ":" too: an escaped colon stops GFM autolinks ("http://127.0.0.1" would otherwise become a link whose text
# shows the other escapes as backslashes) and Streamlit's ":red[...]" / ":material/...:" directives
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~$:])")
ZWSP = "\u200b"


def esc(value: object) -> str:
    """HTML-escape any value (None -> empty string), quotes included, for text and attribute positions."""
    return html.escape("" if value is None else str(value), quote=True)


def plain_title(value: object, limit: int = 600) -> str:
    """Plain text safe for a pyvis/vis-network tooltip: no "href" substring, no angle brackets, bounded length."""
    text = "" if value is None else str(value)
    if len(text) > limit:
        text = text[:limit] + "…"
    text = text.replace("<", "‹").replace(">", "›")
    return _HREF.sub(lambda m: m.group(0) + ZWSP, text)


def md(value: object) -> str:
    """Escape Markdown syntax so untrusted text shown through st.markdown/st.caption stays literal text."""
    text = "" if value is None else str(value)
    return _MD_SPECIAL.sub(r"\\\1", text).replace("\n", " ")


def shorten(text: str | None, limit: int = 120) -> str:
    """One line, at most `limit` characters."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` for a CSV export: a text cell a spreadsheet would run as a formula (starting with = + - @, a tab or
    a carriage return, also after spaces: `=HYPERLINK(...)`, `+cmd|' /C calc'!A0`) gets a leading apostrophe, so it
    opens as the text it is. Numbers stay numbers."""
    out = frame.copy()
    for column in out.columns:
        if pd.api.types.is_object_dtype(out[column]) or pd.api.types.is_string_dtype(out[column]):
            out[column] = pd.Series([("'" + v) if isinstance(v, str) and v.lstrip(" ").startswith(_FORMULA) else v
                                     for v in out[column]], index=out.index, dtype=out[column].dtype)
    return out
