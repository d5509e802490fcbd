"""Corpus overview view models: counts per channel, topic and person, a message-volume timeline, and message
search over a scope's (or the whole corpus') messages DataFrame (`Store.messages_frame`)."""
from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from tmem.viz.safe import esc

MAX_GROUPS = 12
# Rows of the message table sent to the browser per page. The demo's scope has 3,000 messages: sent whole, the table
# was 730 KB over the websocket on every load of the Corpus page (its Arrow bytes built on the server each time);
# one page is a fifteenth of that. Search and filters still run over every message (search_messages).
PAGE_ROWS = 200


def group_counts(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    """Messages, first and last timestamp per value of `column` (None shown as "(none)"), most messages first."""
    keyed = frame.assign(**{column: frame[column].fillna("(none)")})
    out = keyed.groupby(column).agg(messages=("id", "size"), first=("timestamp", "min"), last=("timestamp", "max"))
    return out.sort_values(["messages", "first"], ascending=[False, True]).reset_index()


def people(frame: pd.DataFrame) -> pd.DataFrame:
    """Authors with their roles and message counts."""
    keyed = frame.assign(author=frame["author"].fillna("(none)"), role=frame["role"].fillna(""))
    out = keyed.groupby("author").agg(messages=("id", "size"),
                                      roles=("role", lambda r: ", ".join(sorted({x for x in r if x}))))
    return out.sort_values("messages", ascending=False).reset_index()


def volume_figure(frame: pd.DataFrame, by: str = "channel", freq: str = "D") -> go.Figure:
    """Stacked bars of messages per period (`freq`: "h", "D", "W") and per `by` value; small groups -> (other)."""
    keyed = frame.assign(group=frame[by].fillna("(none)"), period=frame["timestamp"].dt.floor(freq)
                         if freq != "W" else frame["timestamp"].dt.to_period("W").dt.start_time)
    top = keyed["group"].value_counts().index[:MAX_GROUPS]
    keyed["group"] = keyed["group"].where(keyed["group"].isin(top), "(other)")
    counts = keyed.groupby(["period", "group"]).size().unstack(fill_value=0)
    step = PERIODS[freq]
    fig = go.Figure([go.Bar(x=counts.index, y=counts[g], name=esc(g), hovertemplate="%{x}<br>%{y} messages",
                            width=step.total_seconds() * 1000 * 0.8) for g in counts.columns])
    fig.update_layout(barmode="stack", height=320, margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom"}, yaxis={"title": "messages"},
                      xaxis=_period_axis(counts.index, freq))
    return fig


PERIODS = {"h": pd.Timedelta(hours=1), "D": pd.Timedelta(days=1), "W": pd.Timedelta(weeks=1)}
TICK_FORMATS = {"h": "%H:%M<br>%b %d", "D": "%b %d<br>%Y", "W": "%b %d<br>%Y"}


def _period_axis(periods: pd.Index, freq: str) -> dict:
    """The x axis in whole periods. Left to plotly, one day of messages in daily bars spans a few milliseconds of
    axis, ticked "23:59:59.9996": the range covers at least five periods and, when few, a tick per period."""
    if not len(periods):
        return {}
    step = PERIODS[freq]
    lo, hi = periods.min() - step / 2, periods.max() + step / 2
    short = (hi - lo) / step < 5
    if short:
        middle, half = lo + (hi - lo) / 2, step * 2.5
        lo, hi = middle - half, middle + half
    axis = {"range": [lo, hi], "tickformat": TICK_FORMATS[freq]}
    return axis | ({"dtick": step.total_seconds() * 1000, "tick0": periods.min()} if (hi - lo) / step <= 12 else {})


def search_messages(frame: pd.DataFrame, text: str | None = None, channel: str | None = None,
                    topic: str | None = None, author: str | None = None) -> pd.DataFrame:
    """Messages whose text (or id) contains `text` (case-insensitive, literal) and whose metadata match."""
    out = frame
    if text:
        needle = text.strip().lower()
        out = out[out["text"].str.lower().str.contains(needle, regex=False)
                  | out["id"].astype(str).str.lower().str.contains(needle, regex=False)]
    for column, value in (("channel", channel), ("topic", topic), ("author", author)):
        if value:
            out = out[out[column].fillna("(none)") == value]
    return out


def page_count(rows: int, size: int = PAGE_ROWS) -> int:
    """Pages of `size` rows that hold `rows` rows (at least one, empty or not)."""
    return max(1, -(-rows // size))


def page_of(frame: pd.DataFrame, page: int, size: int = PAGE_ROWS) -> pd.DataFrame:
    """Rows of 1-based page `page` (clamped to the pages there are), in the frame's order."""
    page = min(max(1, int(page)), page_count(len(frame), size))
    return frame.iloc[(page - 1) * size: page * size]


def questions_frame(questions) -> pd.DataFrame:
    """Stored questions as a table (no gold fields: those are evaluation-only)."""
    return pd.DataFrame([{"id": q.id, "type": q.type, "asking_user": q.asking_user, "text": q.text}
                         for q in questions], columns=["id", "type", "asking_user", "text"])
