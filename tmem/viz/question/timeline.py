"""The anchor timeline (paper Sec. 4.2) as a plotly figure: messages over time in one lane per topic (or channel),
BM25 anchors sized by score, DBSCAN clusters as shaded bands labelled with their seed density rho and whether
they passed mu, padded windows as dashed outlines, recovered messages, and gold evidence ticks.

Each band also gets a clickable square marker (customdata = band id, "C<cluster id>") so that selecting it in the
app filters the message list (`band_from_selection`). All hover and tick text is HTML-escaped (plotly renders a
small HTML subset, links included).
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

import pandas as pd
import plotly.graph_objects as go

from tmem.types import Anchor, Gold, Message, Trace
from tmem.viz.question.evidence import statuses
from tmem.viz.safe import esc, shorten

OTHER = "(other lanes)"
COLORS = {"message": "#b8bec6", "anchor": "#1f6feb", "recovered": "#e8590c", "candidate": "#f0a868",
          "gold": "#2b8a3e", "accepted": "rgba(12,133,153,0.16)", "accepted_line": "#0c8599",
          "rejected": "rgba(140,140,140,0.12)", "window": "#e8590c", "lost": "#e03131"}
# A band is at least this share of the shown time range wide: at a six-week scale a 20-minute band would be a thin
# vertical line, read as a gold tick. Bands are teal, gold ticks green, so the two never share a colour either.
BAND_MIN_SHARE = 0.015
# Band labels ("C12", ~20 px at 10 px) closer than this share of the shown range go on separate rows: at 1100 px the
# plot is ~560 px wide, so 6 % is ~34 px, a label and a gap.
LABEL_SHARE, LABEL_ROWS, LABEL_ROW_PX = 0.06, 4, 12
BRIEF_CHARS = 70  # text shown when hovering a background message (the trace's own messages show 160)
# Above this many messages the untouched background is a density strip per lane (one heatmap image), not a dot per
# message: Chromium spent ~2 s of every Next / Previous in Failures' triage drawing the demo's 3,000 SVG dots
# (measured with scripts/bench_triage.py: the Timeline tab without them 0.9 s, with them 3.2 s at load 12; WebGL
# dots were no faster there, docs/app.md). At ~3 px per bin the strip shows what the dots showed at the opening
# zoom; the trace's own messages (anchors, candidates, recovered, gold) stay one marker each.
DOTS_MAX, DENSITY_BINS = 1500, 360
STRIPE_SHARE = 0.45  # of a lane's height: the strip sits on the lane's line like the dots did, bands show around it


def _lane_value(value: object) -> str:
    return "(none)" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)


def lanes_for(trace: Trace, messages: pd.DataFrame, gold: Gold | None, lane: str) -> list[str]:
    """Lanes that hold anything the trace touched, ordered by their first such message; the rest share OTHER."""
    marks = statuses(trace, gold)
    touched = (marks.anchors | marks.recovered | marks.candidates | marks.gold
               | {i for c in trace.clusters for i in c.member_ids})
    hit = messages[messages["id"].isin(touched)].sort_values("timestamp")
    lanes = list(dict.fromkeys(_lane_value(v) for v in hit[lane]))
    if len(set(messages[lane].map(_lane_value))) > len(lanes):
        lanes.append(OTHER)
    return lanes or [OTHER]


def _brief_hover(rows: pd.DataFrame) -> list[str]:
    """The background messages' hover: id, time, author and the text's start. All 3,000 of the demo's dots carried
    the full hover (channel, topic, 160 characters): 0.8 MB of figure for the browser to parse on every tab visit."""
    # plain ASCII around the escaped data: the figure's JSON writes "<br>" or "·" as 6-character escapes
    # plain lists: iterating an Arrow-backed column yields one boxed value per call (0.17 s for the demo's 3,000)
    return [f"{esc(i)}, {t:%Y-%m-%d %H:%M}, {esc(a)}: {esc(shorten(x, BRIEF_CHARS))}"
            for i, t, a, x in zip(rows["id"].tolist(), rows["timestamp"].tolist(), rows["author"].tolist(),
                                  rows["text"].tolist())]


def _hover(rows: pd.DataFrame, extra: Mapping[str, str] | None = None) -> list[str]:
    extra = extra or {}
    return [f"<b>{esc(r.id)}</b> · {r.timestamp:%Y-%m-%d %H:%M} · {esc(r.author)}<br>"
            f"{esc(r.channel)} / {esc(r.topic)}{extra.get(r.id, '')}<br>{esc(shorten(r.text, 160))}"
            for r in rows.itertuples()]


def _scatter(rows: pd.DataFrame, lane_of: Mapping[str, str], name: str, marker: dict,
             extra: Mapping[str, str] | None = None, brief: bool = False) -> go.Scatter:
    kind = go.Scattergl if len(rows) > 4000 else go.Scatter
    x = rows["timestamp"].dt.strftime("%Y-%m-%d %H:%M:%S") if brief else rows["timestamp"]  # not ".000000" each
    return kind(x=x, y=[esc(lane_of[i]) for i in rows["id"]], mode="markers", name=name,
                marker=marker, hovertext=_brief_hover(rows) if brief else _hover(rows, extra), hoverinfo="text")


def _density(messages: pd.DataFrame, lane_of: Mapping[str, str], lanes: list[str]) -> go.Heatmap:
    """The scope's messages counted per lane and time bin (DENSITY_BINS over the whole scope), as one heatmap: empty
    bins transparent, darker grey for more messages; hovering a bin gives its lane, start and count."""
    times = pd.to_datetime(messages["timestamp"])
    lo, hi = times.min(), times.max()
    width = max((hi - lo) / DENSITY_BINS, pd.Timedelta(minutes=1))
    bins = ((times - lo) // width).clip(upper=DENSITY_BINS - 1).astype(int).tolist()
    counts: dict[tuple[str, int], int] = {}
    for lane, b in zip((lane_of[i] for i in messages["id"].tolist()), bins):
        counts[lane, b] = counts.get((lane, b), 0) + 1
    span = range(max(bins) + 1)
    return go.Heatmap(x=[lo + width * b for b in span], y=[esc(name) for name in lanes],
                      z=[[counts.get((name, b)) for b in span] for name in lanes], xperiod=None,
                      name="messages (density)", showlegend=True, showscale=False, zmin=1, hoverongaps=False,
                      colorscale=[[0, "#e3e6ea"], [1, "#7b838c"]], ygap=_stripe_gap(len(lanes)),
                      hovertemplate="%{y} · from %{x|%Y-%m-%d %H:%M}: %{z} message(s)<extra></extra>")


def _height(lanes: int) -> int:
    return int(min(900, max(340, 190 + 60 * lanes)))


def _stripe_gap(lanes: int) -> int:
    """Pixels left empty between two lanes' strips: each strip takes STRIPE_SHARE of its lane (the plot is the
    figure's height less ~110 px of margins and legend)."""
    return max(1, int((_height(lanes) - 110) / max(lanes, 1) * (1 - STRIPE_SHARE)))


def _span(lane_index: Mapping[str, int], lane_of: Mapping[str, str], ids: Iterable[str],
          pad: float) -> tuple[float, float]:
    idx = [lane_index[lane_of[i]] for i in ids if i in lane_of] or [0]
    return min(idx) - pad, max(idx) + pad


def timeline_figure(messages: pd.DataFrame, trace: Trace, gold: Gold | None = None, lane: str = "topic",
                    focus: bool = True, band: str | None = None, lost: Iterable[str] = (),
                    moment: datetime | None = None) -> go.Figure:
    """The timeline of one trace over its scope's messages (`lane` is "topic" or "channel"); `lost`: the messages of
    the gold unit a failure lost (ringed in red); `moment`: the "state as of" time (a vertical line)."""
    marks = statuses(trace, gold)
    lanes = lanes_for(trace, messages, gold, lane)
    lane_index = {name: i for i, name in enumerate(lanes)}
    names = [_lane_value(v) for v in messages[lane].tolist()]
    lane_of = {i: (name if name in lane_index else OTHER) for i, name in zip(messages["id"].tolist(), names)}
    by_id = messages.set_index("id", drop=False)
    pick = lambda ids: by_id[by_id.index.isin(list(ids))]
    fig = go.Figure()
    if len(messages) > DOTS_MAX:
        fig.add_trace(_density(messages, lane_of, lanes))
    else:
        fig.add_trace(_scatter(messages, lane_of, "message", {"color": COLORS["message"], "size": 5}, brief=True))
    rank = {a.message_id: a for a in trace.anchors}
    top = max((a.score for a in trace.anchors), default=1.0) or 1.0
    anchors = pick(set(rank))
    fig.add_trace(_scatter(anchors, lane_of, "BM25 anchor (size = score)",
                           {"color": COLORS["anchor"], "opacity": 0.85, "line": {"width": 0},
                            "size": [7 + 19 * max(rank[i].score, 0) / top for i in anchors["id"]]},
                           {i: f"<br>anchor rank {a.rank}, BM25 {a.score:.2f}" for i, a in rank.items()}))
    fig.add_trace(_scatter(pick(marks.candidates), lane_of, "window candidate, not selected",
                           {"color": "rgba(0,0,0,0)", "size": 9, "line": {"color": COLORS["candidate"], "width": 1.5}}))
    fig.add_trace(_scatter(pick(marks.recovered), lane_of, "recovered (selected, not an anchor)",
                           {"color": COLORS["recovered"], "size": 12, "symbol": "diamond"}))
    if marks.gold:
        fig.add_trace(_scatter(pick(marks.gold), lane_of, "gold evidence",
                               {"color": COLORS["gold"], "size": 22, "symbol": "line-ns-open",
                                "line": {"width": 3, "color": COLORS["gold"]}}))
    lost = set(lost)
    if lost:
        fig.add_trace(_scatter(pick(lost), lane_of, "lost gold evidence (where the failure lost it)",
                               # an open symbol is drawn in marker.color (its legend entry too): the ring's red
                               {"color": COLORS["lost"], "size": 30, "symbol": "circle-open",
                                "line": {"width": 3.5, "color": COLORS["lost"]}}))
    shown = _shown_range(trace, messages, marks)
    _add_bands(fig, trace, lane_index, lane_of, band, shown)
    _layout(fig, trace, lanes, shown if focus else None)
    if moment is not None:
        fig.add_vline(x=moment, line={"color": "#5f3dc4", "width": 2, "dash": "dot"})
        fig.add_annotation(x=moment, y=1, yref="paper", text=f"as of {moment:%Y-%m-%d %H:%M}", showarrow=False,
                           font={"color": "#5f3dc4", "size": 11}, xanchor="left", yanchor="bottom")
    return fig


def _add_bands(fig: go.Figure, trace: Trace, lane_index: Mapping[str, int], lane_of: Mapping[str, str],
               band: str | None, shown: tuple[datetime, datetime] | None = None) -> None:
    xs, ys, labels, ids, shapes = [], [], [], [], []
    least = max(timedelta(minutes=20), (shown[1] - shown[0]) * BAND_MIN_SHARE if shown else timedelta(0))
    for c in trace.clusters:
        bid = f"C{c.cluster_id}"
        y0, y1 = _span(lane_index, lane_of, c.member_ids, 0.42)
        middle = c.start + (c.end - c.start) / 2
        start, end = (c.start, c.end) if c.end - c.start >= least else (middle - least / 2, middle + least / 2)
        chosen = band == bid
        shapes.append({"type": "rect", "x0": start, "x1": end, "y0": y0, "y1": y1, "layer": "below",
                       "fillcolor": COLORS["accepted" if c.accepted else "rejected"],
                       "line": {"color": COLORS["accepted_line"] if c.accepted else "#8c8c8c",
                                "dash": "solid" if c.accepted else "dot", "width": 3 if chosen else 1}})
        xs.append(middle)
        ys.append(y1)
        labels.append(f"{bid} · {c.topic or c.channel or '(no topic)'} · {len(c.member_ids)} anchors over "
                      f"{c.span_hours:.1f} {c.unit}s · ρ={c.density:.2f} {'> ' if c.accepted else '≤ '}"
                      + (f"μ*={c.threshold:.3f} (background {c.background:.3f}/{c.unit}, App. F.1)"
                         if c.background is not None else "μ") + (": window" if c.accepted else ": no window"))
        ids.append(bid)
    for w in trace.windows:
        y0, y1 = _span(lane_index, lane_of, [c.message_id for c in w.candidates], 0.47)
        shapes.append({"type": "rect", "x0": w.start, "x1": w.end, "y0": y0, "y1": y1, "layer": "below",
                       "line": {"color": COLORS["window"], "dash": "dash", "width": 1.5}})
    # one assignment: each add_shape / add_annotation validates and copies the whole tuple again (0.2 s for 12)
    fig.update_layout(shapes=list(fig.layout.shapes) + shapes)
    if xs:
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="markers", name="cluster band (click ▼ to filter)",
                                 marker={"symbol": "triangle-down", "size": 12, "color": COLORS["accepted_line"]},
                                 customdata=ids,
                                 hoverinfo="text", hovertext=[esc(t) for t in labels], yaxis="y2"))
        fig.update_layout(annotations=list(fig.layout.annotations) + [
            {"x": x, "y": y, "yref": "y2", "text": bid, "showarrow": False, "yshift": 12 + LABEL_ROW_PX * level,
             "font": {"size": 10, "color": COLORS["accepted_line"]}, "name": "band label"}
            for x, y, bid, level in zip(xs, ys, ids, _label_levels(xs, shown))])


def _label_levels(xs: list[datetime], shown: tuple[datetime, datetime] | None) -> list[int]:
    """The row of each band's label above its marker (0 = just above). Greedy in time order: the lowest row whose last
    label is at least LABEL_SHARE of the shown range to the left, so labels side by side never touch ("C2C3")."""
    if not shown or not xs:
        return [0] * len(xs)
    near = (shown[1] - shown[0]) * LABEL_SHARE
    levels, last = [0] * len(xs), []  # last[row]: the time of the latest label on that row
    for k in sorted(range(len(xs)), key=lambda k: xs[k]):
        free = [row for row, x in enumerate(last) if xs[k] - x >= near]
        if free:
            row = free[0]
        elif len(last) < LABEL_ROWS:
            row = len(last)
            last.append(xs[k])
        else:  # every row taken: the one whose last label is furthest left
            row = min(range(len(last)), key=lambda r: last[r])
        last[row] = xs[k]
        levels[k] = row
    return levels


def _shown_range(trace: Trace, messages: pd.DataFrame, marks) -> tuple[datetime, datetime] | None:
    """The time range the figure opens on: everything the trace touched, padded."""
    shown = marks.anchors | marks.recovered | marks.candidates | marks.gold
    touched = messages[messages["id"].isin(shown)]["timestamp"]
    times = list(touched) + [c.start for c in trace.clusters] + [w.end for w in trace.windows] \
        + [w.start for w in trace.windows]
    if not times:
        return None
    lo, hi = min(times), max(times)
    pad = max((hi - lo) * 0.06, timedelta(hours=1))
    return lo - pad, hi + pad


def _layout(fig: go.Figure, trace: Trace, lanes: list[str], shown: tuple[datetime, datetime] | None) -> None:
    names = [esc(v) for v in lanes]
    height = _height(len(lanes))
    axis = {"categoryorder": "array", "categoryarray": names, "range": [-0.6, len(lanes) - 0.4]}
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 40, "b": 10}, hovermode="closest",
                      legend={"orientation": "h", "y": 1.02, "yanchor": "bottom", "x": 0}, dragmode="zoom",
                      yaxis={"type": "category", "title": None, **axis},
                      yaxis2={"overlaying": "y", "visible": False, "type": "linear", "range": axis["range"]},
                      xaxis={"title": None}, uirevision=trace.question.id + trace.variant)
    if shown:
        fig.update_xaxes(range=list(shown))


def seed_strip(anchors: Iterable[Anchor], messages: Mapping[str, Message], gold: Gold | None) -> go.Figure:
    """The BM25 anchors over time, sized by score, gold evidence green: the timeline's first layer, drawn on the
    first screen while discovery runs. A small static plotly figure, so the browser also loads the plotting
    library then, not only when the whole timeline arrives (measured in docs/app.md, "The first screen")."""
    golds = set(gold.evidence_ids) if gold else set()
    shown = [(a, messages[a.message_id]) for a in anchors if a.message_id in messages]
    top = max((a.score for a, _ in shown), default=1.0) or 1.0
    fig = go.Figure(go.Scatter(
        x=[m.timestamp for _, m in shown], y=[0] * len(shown), mode="markers", hoverinfo="skip",
        marker={"size": [7 + 13 * max(a.score, 0) / top for a, _ in shown], "opacity": 0.8,
                "color": [COLORS["gold"] if a.message_id in golds else COLORS["anchor"] for a, _ in shown]}))
    fig.update_layout(height=110, margin={"l": 10, "r": 10, "t": 24, "b": 10}, showlegend=False,
                      title={"text": "BM25 anchors over time (green: gold evidence)", "font": {"size": 12}},
                      yaxis={"visible": False, "range": [-1, 1]}, xaxis={"title": None})
    return fig


def band_from_selection(selection: Mapping | None) -> str | None:
    """The band id of the first selected band marker in a plotly selection event (st.plotly_chart on_select)."""
    points = ((selection or {}).get("selection") or {}).get("points") or []
    for point in points:
        data = point.get("customdata")
        if isinstance(data, list):
            data = data[0] if data else None
        if isinstance(data, str) and data.startswith("C"):
            return data
    return None
