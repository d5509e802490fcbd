"""Corpus overview view models: counts per channel, topic and person, a message-volume timeline, and message
search over a scope's (or the whole corpus') messages DataFrame (`Store.messages_frame`)."""
from __future__ import annotations

import pandas as pd

from tmem.viz.charts import legend_and_svg, swatch
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


# The message-volume chart is an SVG drawn here, not a plotly figure: on the Corpus page it was the only plotly
# element, and a fresh browser downloaded plotly's 4.7 MB bundle and ran 0.8-1.0 s of its script for 40 days of
# stacked bars (CDP profile, docs/app.md "Browser work per page"). Hovering a bar shows its <title> (no script).
COLORS = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692", "#b6e880", "#ff97ff",
          "#fecb52", "#1f77b4", "#8c564b")  # plotly's default colours, in its order: the chart looks as it did
OTHER_COLOR = "#b0b0b0"
PERIODS = {"h": pd.Timedelta(hours=1), "D": pd.Timedelta(days=1), "W": pd.Timedelta(weeks=1)}
TICK_FORMATS = {"h": ("%H:%M", "%b %d"), "D": ("%b %d", "%Y"), "W": ("%b %d", "%Y")}  # two lines per tick
MAX_TICKS = 12
HEIGHT, TOP, BOTTOM = 300, 22, 40  # px: the chart's height and its margins (its width is the page's)
LEFT, RIGHT = 5.0, 99.0  # % of the width: the counts' column, the plot's right end
NAME_CHARS = 28  # characters of a group's name in the legend


def volume_counts(frame: pd.DataFrame, by: str = "channel", freq: str = "D") -> pd.DataFrame:
    """Messages per period (`freq`: "h", "D", "W"; rows, in time order) and per `by` value (columns, largest group
    first); groups beyond the MAX_GROUPS largest are summed as "(other)", a missing value is "(none)"."""
    keyed = frame.assign(group=frame[by].fillna("(none)"), period=frame["timestamp"].dt.floor(freq)
                         if freq != "W" else frame["timestamp"].dt.to_period("W").dt.start_time)
    top = keyed["group"].value_counts().index[:MAX_GROUPS]
    keyed["group"] = keyed["group"].where(keyed["group"].isin(top), "(other)")
    counts = keyed.groupby(["period", "group"]).size().unstack(fill_value=0)
    order = [g for g in top if g in counts.columns] + (["(other)"] if "(other)" in counts.columns else [])
    return counts[order]


def period_axis(periods: pd.Index, freq: str) -> tuple[pd.Timestamp, pd.Timestamp, list[pd.Timestamp]]:
    """(start, end, ticks) of the x axis in whole periods: at least five periods wide (one day of messages in daily
    bars is a bar among empty days, not a bar filling the chart), a tick on each period when there are at most
    MAX_TICKS of them, else on every n-th period from the first."""
    step = PERIODS[freq]
    lo, hi = periods.min() - step / 2, periods.max() + step / 2
    if (hi - lo) / step < 5:
        middle = lo + (hi - lo) / 2
        lo, hi = middle - step * 2.5, middle + step * 2.5
    first = periods.min() - step * int((periods.min() - lo) / step)
    every = max(1, -(-int(round((hi - lo) / step)) // MAX_TICKS))
    ticks = []
    while (tick := first + step * every * len(ticks)) <= hi:
        ticks.append(tick)
    return lo, hi, ticks


def _nice_step(top: int) -> int:
    """A round step (1, 2, 5 x 10^k) giving 2-5 grid lines up to `top`."""
    step = 1
    while top / step > 5:
        step = step * 5 // 2 if str(step)[0] == "2" else step * 2
    return step


def volume_svg(frame: pd.DataFrame, by: str = "channel", freq: str = "D") -> str:
    """Stacked bars of messages per period and per `by` value (volume_counts) under a legend, counts up the left;
    every bar's <title> names its period, group and count. Horizontal positions are percentages of the page's
    width and vertical ones pixels, so the text keeps its size at any width (a scaled viewBox shrank it to 6 px at
    1100 px). All text from the data goes through `esc`; one line with no blank line, so shown through st.markdown
    it stays one raw HTML block (Markdown never parses inside it)."""
    counts = volume_counts(frame, by, freq)
    if not len(counts):
        return "<p><i>no messages</i></p>"
    step = PERIODS[freq]
    lo, hi, ticks = period_axis(counts.index, freq)
    colors = {g: OTHER_COLOR if g == "(other)" else COLORS[i % len(COLORS)] for i, g in enumerate(counts.columns)}
    legend = "".join(swatch(color, esc(g if len(g) <= NAME_CHARS else g[: NAME_CHARS - 1] + "…"))
                     for g, color in colors.items())
    x = lambda t: LEFT + (RIGHT - LEFT) * ((t - lo) / (hi - lo))  # noqa: E731 - % of the width
    bar = (RIGHT - LEFT) * (step / (hi - lo)) * 0.8
    peak = int(counts.sum(axis=1).max())
    grid = _nice_step(peak)
    ceiling = -(-peak // grid) * grid  # the top grid line at or above the tallest bar
    y = lambda v: TOP + (HEIGHT - TOP - BOTTOM) * (1 - v / ceiling)  # noqa: E731 - px
    top_fmt, bottom_fmt = TICK_FORMATS[freq]
    body = ['<text x="0" y="12" font-size="11" fill="#555">messages</text>']
    for v in range(0, ceiling + 1, grid):
        body.append(f'<line x1="{LEFT}%" x2="{RIGHT}%" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#e5e8ef"/>'
                    f'<text x="{LEFT - 0.5}%" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end" fill="#555">{v}'
                    '</text>')
    for t in ticks:
        anchor = "end" if x(t) > RIGHT - 2 else "middle"  # the last label inside the chart, not cut at its edge
        body.append(f'<text x="{x(t):.2f}%" y="{HEIGHT - BOTTOM + 16}" font-size="11" text-anchor="{anchor}" '
                    f'fill="#555">{esc(t.strftime(top_fmt))}<tspan x="{x(t):.2f}%" dy="13">'
                    f'{esc(t.strftime(bottom_fmt))}</tspan></text>')
    for period, row in counts.iterrows():
        base, when = 0, esc(period.strftime("%b %d %Y %H:%M" if freq == "h" else "%b %d %Y"))
        for group, n in row.items():
            if n:
                body.append(f'<rect x="{x(period) - bar / 2:.3f}%" y="{y(base + n):.1f}" width="{bar:.3f}%" '
                            f'height="{y(base) - y(base + n):.1f}" fill="{colors[group]}"><title>{when} · '
                            f'{esc(group)}: {n} messages</title></rect>')
                base += n
    return legend_and_svg(legend, body, HEIGHT, "messages per period", LEFT)


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


# the table's orders (label -> columns, ascending): a page of 200 rows cannot be sorted whole by its header, which
# orders only the rows it holds, so the order is chosen before the rows are paged
ORDERS = {"oldest first": (["timestamp"], True), "newest first": (["timestamp"], False),
          "author": (["author", "timestamp"], True), "channel": (["channel", "timestamp"], True),
          "topic": (["topic", "timestamp"], True)}


def sort_messages(frame: pd.DataFrame, order: str) -> pd.DataFrame:
    """`frame` in ORDERS[order], for every page at once: stable (ties keep the stored order), a missing author,
    channel or topic last."""
    columns, ascending = ORDERS[order]
    return frame.sort_values(columns, ascending=ascending, kind="stable", na_position="last")


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
