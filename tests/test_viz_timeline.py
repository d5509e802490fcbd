"""tmem.viz.question.timeline: the anchor timeline figure and band selection."""
from __future__ import annotations

import dataclasses

import pandas as pd

from tmem.types import Message
from tmem.viz.question.timeline import COLORS, OTHER, band_from_selection, lanes_for, seed_strip, timeline_figure


def _trace(fig, name_start):
    return next(t for t in fig.data if t.name.startswith(name_start))


def test_figure_has_every_layer(golden_trace):
    trace, gold, frame = golden_trace
    fig = timeline_figure(frame, trace, gold)
    names = [t.name for t in fig.data]
    for expected in ("message", "BM25 anchor", "recovered", "gold evidence", "cluster band"):
        assert any(n.startswith(expected) for n in names), expected
    assert len(_trace(fig, "BM25 anchor").x) == len(trace.anchors)
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(rects) == len(trace.clusters) + len(trace.windows)
    assert fig.layout.height and fig.layout.height >= 340


def test_anchor_size_follows_score(golden_trace):
    trace, gold, frame = golden_trace
    sizes = list(_trace(timeline_figure(frame, trace, gold), "BM25 anchor").marker.size)
    assert max(sizes) > min(sizes)


def test_accepted_and_rejected_bands_differ(golden_trace):
    trace, gold, frame = golden_trace
    fig = timeline_figure(frame, trace, gold)
    fills = {s.fillcolor for s in fig.layout.shapes if s.fillcolor}
    assert {c.accepted for c in trace.clusters} == {True, False} and len(fills) == 2


def test_gold_tick_on_the_recovered_update(golden_trace):
    trace, gold, frame = golden_trace
    gold_trace = _trace(timeline_figure(frame, trace, gold), "gold evidence")
    assert any("m04" in h for h in gold_trace.hovertext)


def test_lanes_are_touched_topics_plus_other(golden_trace):
    trace, gold, frame = golden_trace
    lanes = lanes_for(trace, frame, gold, "topic")
    assert "launch" in lanes and lanes[-1] == OTHER or "launch" in lanes
    channel_lanes = lanes_for(trace, frame, gold, "channel")
    assert "#release" in channel_lanes


def test_band_marker_selection_parses():
    assert band_from_selection({"selection": {"points": [{"customdata": "C1"}]}}) == "C1"
    assert band_from_selection({"selection": {"points": [{"customdata": ["C3"]}]}}) == "C3"
    assert band_from_selection({"selection": {"points": [{"x": 1}]}}) is None
    assert band_from_selection(None) is None


def test_hover_and_tick_text_escaped(evil_trace):
    trace, gold, frame = evil_trace
    fig = timeline_figure(frame, trace, gold)
    texts = [h for t in fig.data for h in (t.hovertext or [])] + [y for t in fig.data for y in (t.y or [])
                                                                  if isinstance(y, str)]
    assert texts and not any("<img" in t or "<script" in t or "<a href" in t for t in texts)
    assert any("&lt;img" in t for t in texts)


def test_focus_sets_a_range_and_off_leaves_autorange(golden_trace):
    trace, gold, frame = golden_trace
    assert timeline_figure(frame, trace, gold, focus=True).layout.xaxis.range is not None
    assert timeline_figure(frame, trace, gold, focus=False).layout.xaxis.range is None


def test_lost_unit_ringed_and_moment_line(golden_trace):
    from datetime import datetime

    trace, gold, frame = golden_trace
    fig = timeline_figure(frame, trace, gold, lost=["m04"], moment=datetime(2025, 3, 10, 12))
    ring = _trace(fig, "lost gold evidence")
    assert len(ring.x) == 1 and "m04" in ring.hovertext[0]
    assert any(s.type == "line" for s in fig.layout.shapes)
    assert "as of 2025-03-10 12:00" in fig.layout.annotations[-1].text
    assert not any(t.name.startswith("lost") for t in timeline_figure(frame, trace, gold).data)


def test_seed_strip_draws_one_point_per_anchor_with_gold_marked(golden_trace):
    """The first screen's BM25 strip (drawn while discovery runs): anchors over time, gold green, no hover text."""
    trace, gold, frame = golden_trace
    by_id = {r.id: Message(id=r.id, scope=trace.question.scope, timestamp=r.timestamp, author=r.author, text=r.text)
             for r in frame.itertuples()}
    gold = dataclasses.replace(gold, evidence=(*gold.evidence, (trace.anchors[1].message_id,)))  # one anchor gold
    points = seed_strip(trace.anchors, by_id, gold).data[0]
    assert len(points.x) == len(trace.anchors) and points.hoverinfo == "skip"
    greens = [c == COLORS["gold"] for c in points.marker.color]
    assert greens == [a.message_id in gold.evidence_ids for a in trace.anchors] and any(greens)


def test_the_lost_unit_ring_and_its_legend_symbol_are_drawn_in_red(golden_trace):
    """Plotly draws an open symbol (and its legend entry) in marker.color: a transparent colour hid both."""
    trace, gold, frame = golden_trace
    ring = _trace(timeline_figure(frame, trace, gold, lost=["m04"]), "lost gold evidence")
    assert ring.marker.symbol == "circle-open" and ring.marker.color == COLORS["lost"]
    assert list(ring.hovertext) and "m04" in ring.hovertext[0]


def test_bands_are_wide_and_teal_at_a_six_week_scale_so_they_never_read_as_gold_ticks(demo_traces):
    traces, gold, frame = demo_traces
    fig = timeline_figure(frame, traces["full"], gold)
    lo, hi = fig.layout.xaxis.range
    assert (hi - lo).days >= 30, "the demo's curated question spans weeks"
    bands = [s for s in fig.layout.shapes if s.fillcolor]
    assert len(bands) == len(traces["full"].clusters) >= 3
    for band in bands:
        assert (band.x1 - band.x0) >= (hi - lo) * 0.014, "a band is more than a tick wide"
        assert band.line.color != COLORS["gold"] and "46,160,67" not in band.fillcolor


def test_labels_of_neighbouring_bands_go_on_separate_rows_not_side_by_side():
    """Bands 1.5 days apart on a 40-day range (C2 and C3 of the demo at 1100 px) once had labels touching ("C2C3"):
    closer than 6 % of the range (2.4 days) a label goes a row up; a row frees once the labels are that far apart."""
    from datetime import datetime, timedelta

    from tmem.viz.question.timeline import _label_levels

    t0 = datetime(2025, 3, 1)
    shown = (t0, t0 + timedelta(days=40))
    xs = [t0 + timedelta(days=d) for d in (1, 10, 11.5, 12, 20, 13)]
    assert _label_levels(xs, shown) == [0, 0, 1, 2, 0, 0]
    crowd = [t0 + timedelta(days=10, hours=h) for h in range(6)]  # more than LABEL_ROWS: the oldest row is reused
    assert _label_levels(crowd, shown) == [0, 1, 2, 3, 0, 1]


def test_background_dots_carry_a_brief_escaped_hover(golden_trace):
    """Every message dot hovers with id, time, author and the text's start, as plain text (no tags: the figure's
    JSON wrote each "<br>" as a 6-character escape, 0.8 MB for the demo's 3,000 dots; now 0.44 MB); the trace's own
    messages keep the full hover. Message text stays escaped."""
    trace, gold, frame = golden_trace
    frame = frame.copy()
    frame.loc[0, "text"] = "<img src=x onerror=alert(1)> " + "long " * 40
    fig = timeline_figure(frame, trace, gold)
    dots = _trace(fig, "message")
    first = dots.hovertext[0]
    assert first.startswith(f"{frame.loc[0, 'id']}, ") and "<img" not in first and "&lt;img" in first
    assert "<b>" not in first and "<br>" not in first and len(first) < 140
    assert all(x.count(":") >= 2 and "." not in x for x in dots.x[:5])  # "YYYY-MM-DD HH:MM:SS"
    assert "<br>" in _trace(fig, "BM25 anchor").hovertext[0]


def test_a_large_scope_draws_its_background_as_a_density_strip(golden_trace, monkeypatch):
    """Issue 42 item 4: above DOTS_MAX messages the untouched background is one heatmap (counts per lane and time
    bin), not a dot per message; the trace's own messages stay markers. Two messages put a minute apart in one lane
    share a bin (the scope spans days: a bin is hours wide), so that bin counts 2."""
    from tmem.viz.question import timeline

    trace, gold, frame = golden_trace
    frame = frame.sort_values("timestamp", ignore_index=True)  # row 0: the scope's first message, in bin 0
    frame.loc[1, "timestamp"] = frame.loc[0, "timestamp"] + pd.Timedelta(minutes=1)
    frame.loc[1, "topic"] = frame.loc[0, "topic"]
    monkeypatch.setattr(timeline, "DOTS_MAX", len(frame) - 1)
    fig = timeline_figure(frame, trace, gold)
    strip = _trace(fig, "messages (density)")
    assert strip.type == "heatmap" and not [t for t in fig.data if t.name == "message"]
    counts = [n for row in strip.z for n in row if n is not None]
    assert sum(counts) == len(frame) and min(counts) >= 1  # every message counted once; empty bins transparent
    lanes = lanes_for(trace, frame, gold, "topic")
    first_lane = frame.loc[0, "topic"] if frame.loc[0, "topic"] in lanes else OTHER
    assert strip.z[list(strip.y).index(first_lane)][0] >= 2
    assert len(_trace(fig, "BM25 anchor").x) == len(trace.anchors)
    monkeypatch.setattr(timeline, "DOTS_MAX", len(frame))  # at the limit: a dot per message, as before
    assert len(_trace(timeline_figure(frame, trace, gold), "message").x) == len(frame)
