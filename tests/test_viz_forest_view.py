"""tmem.viz.question.forest_view and the interactive forest page: which trees are shown, the strip of single messages,
time left to right in topic lanes (columns computed by hand), the answer chain, zoom without the wheel."""
from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime

from tmem.types import EXPAND, ROOT, UPDATE, Answer, ForestNode, Gold, Question, Trace
from tmem.viz.question.forest import forest_height, forest_html
from tmem.viz.question.forest_view import X_STEP, answer_chain, cited_ids, first_words, focus_trees, forest_view

T = lambda day, hour=0: datetime(2025, 3, day, hour)
# tree 1: m1 (A) -UPDATE-> m2 (A) -EXPAND-> m4 (A); m1 -EXPAND-> m3 (B).  tree 2: m5 alone.
# tree 3: m6 (A) -EXPAND-> m7 (A), unrelated to the answer.
NODES = (ForestNode(1, 0, ROOT, 0, 1, "m1", T(1), "ann", "the launch is planned for march twenty"),
         ForestNode(2, 1, UPDATE, 1, 1, "m2", T(2), "bob", "launch moved to april three"),
         ForestNode(3, 1, EXPAND, 1, 1, "m3", T(2, 12), "cy", "slides ready"),
         ForestNode(4, 2, EXPAND, 2, 1, "m4", T(3), "ann", "april three confirmed by legal"),
         ForestNode(5, 0, ROOT, 0, 2, "m5", T(1, 12), "dee", "lunch?"),
         ForestNode(6, 0, ROOT, 0, 3, "m6", T(4), "eve", "ci is red"),
         ForestNode(7, 6, EXPAND, 1, 3, "m7", T(5), "bob", "fixed ci"))
TOPICS = {"m1": "A", "m2": "A", "m3": "B", "m4": "A", "m5": "A", "m6": "A", "m7": "A"}
GOLD = Gold("q", "april three", (("m2",),))


def _trace(reason="offline: best match m4", nodes=NODES):
    answer = Answer("forest", "April 3", "offline", True, "h", 10, reason)
    return Trace(Question("q", "s", "When is the launch?"), "full", "cfg", "c", nodes=nodes, answers=(answer,))


def test_the_answer_chain_is_what_the_forest_answer_cites_and_the_states_they_replaced():
    trace = _trace("offline: best match m4; followed UPDATE chain m1 -> m2 (not m44 or xm3)")
    assert cited_ids(trace) == {"m1", "m2", "m4"}
    assert answer_chain(_trace("best match m4")) == {4}, "an EXPAND parent is context, not the chain"
    assert answer_chain(_trace("best match m2")) == {1, 2}, "an UPDATE replaced m1: both are the chain"
    assert answer_chain(_trace("no ids here")) == frozenset()
    flat = Answer("flat", "x", "offline", True, "h", 10, "offline: best match m7")  # read a list, not the forest
    assert answer_chain(replace(_trace("best match m2"), answers=(*_trace("best match m2").answers, flat))) == {1, 2}


def test_focus_trees_hold_gold_or_the_chain_else_all():
    assert focus_trees(_trace(), GOLD) == {1}
    assert focus_trees(_trace("m7"), None) == {3}
    assert focus_trees(_trace("nothing"), None) == {1, 2, 3}


def test_default_view_shows_the_answer_tree_and_folds_singles_into_the_strip():
    view = forest_view(_trace(), GOLD, TOPICS)
    assert view.shown_trees == {1} and view.all_trees == 3
    assert view.strip == (5,) and view.hidden == {6, 7} and view.drawn == 5
    assert view.focus == (4,) and view.chain == {4}
    every = forest_view(_trace(), GOLD, TOPICS, show_all=True)
    assert every.shown_trees == {1, 2, 3} and every.hidden == frozenset() and every.strip == (5,)


def test_columns_run_with_time_and_children_right_of_parents():
    view = forest_view(_trace(), GOLD, TOPICS, show_all=True)
    x = {i: view.positions[i][0] / X_STEP for i in (1, 2, 3, 4, 6, 7)}
    # by hand: m1 col 0; m2 col 1 (right of m1, same sub-row); m3 col 1 (lane B); m4 col 2;
    # m6 col 2 (time never goes back; m4 holds lane A's first sub-row there, so a second sub-row); m7 col 3
    assert x == {1: 0, 2: 1, 3: 1, 4: 2, 6: 2, 7: 3}
    lanes = {lane.name: lane for lane in view.lanes}
    assert [lane.name for lane in view.lanes] == ["A", "B"]
    for i, topic in ((1, "A"), (2, "A"), (4, "A"), (6, "A"), (3, "B")):
        assert lanes[topic].top < view.positions[i][1] < lanes[topic].bottom
    assert view.positions[6][1] > view.positions[4][1]  # the second sub-row
    assert view.strip_top > lanes["B"].bottom and view.positions[5][1] > view.strip_top
    assert [label for _, label in view.ticks] == ["Mar 1", "Mar 2", "Mar 3", "Mar 5"]


def test_first_words():
    assert first_words("one two three four five six seven eight") == "one two three four five six seven…"
    assert first_words("short text") == "short text"


def _data(page):
    return json.loads(re.search(r"nodes = new vis\.DataSet\((\[.*?\])\);", page, re.DOTALL).group(1))


def test_page_counts_every_node_hides_the_rest_and_never_zooms_on_the_wheel():
    page = forest_html(_trace(), GOLD, TOPICS, 500)
    data = {d["id"]: d for d in _data(page)}
    assert 'data-node-count="7"' in page and 'data-drawn-count="5"' in page and len(data) == 7
    assert {i for i, d in data.items() if d.get("hidden")} == {6, 7}
    assert data[4]["label"].startswith("★ april three confirmed") and "ann" in data[4]["label"]
    assert not data[2]["label"].startswith("★") and not data[3]["label"].startswith("★")
    options = json.loads(re.search(r"network = new vis\.Network\(container, data, options\);", page) and
                         re.search(r"var options = (\{.*?\});\n", page, re.DOTALL).group(1))
    assert options["interaction"]["zoomView"] is False
    assert 'id="zoom-in"' in page and "e.ctrlKey" in page and "1 of 3 trees shown" in page


def test_lane_names_cannot_break_out_of_the_script():
    evil = dict(TOPICS, m1="</script><img src=x onerror=alert(1)>")
    page = forest_html(_trace(), GOLD, evil, 500)
    assert "<img src=x" not in page and "</script><img" not in page
    lanes = json.loads(re.search(r"var lanes = (\[.*?\]), ticks", page).group(1))
    assert lanes[0][0].startswith("‹/script›‹img src=x")  # reaches the canvas only as inert text


def test_height_bounded():
    assert 380 <= forest_height(_trace(), GOLD, TOPICS) <= 760


def test_no_edge_passes_behind_an_unrelated_node_on_the_demos_curated_tree(demo_traces):
    """The default curve of the curated tree's edges ran behind other messages (a long edge across a row read as a
    chain through them); the layout and the arcs avoid it. The checker samples the curves vis-network draws."""
    from tmem.viz.question.forest_view import crossings, edge_routes

    traces, gold, frame = demo_traces
    trace, topics = traces["full"], dict(zip(frame["id"], frame["topic"]))
    view = forest_view(trace, gold, topics)
    routes = edge_routes(trace, view)
    assert routes and crossings(trace, view) == []


def test_node_positions_are_stable_between_the_default_view_and_all_trees(demo_traces):
    traces, gold, frame = demo_traces
    trace, topics = traces["full"], dict(zip(frame["id"], frame["topic"]))
    default, every = forest_view(trace, gold, topics), forest_view(trace, gold, topics, show_all=True)
    shown = [i for i in default.positions if i not in default.hidden and i not in default.strip]
    assert len(shown) < every.drawn
    lanes = lambda v: {ln.name: ln for ln in v.lanes}  # noqa: E731
    for i in shown:  # the same lane and sub-row (offset within its lane)
        lane = next(ln for ln in default.lanes if ln.top < default.positions[i][1] < ln.bottom)
        assert every.positions[i][1] - lanes(every)[lane.name].top == default.positions[i][1] - lane.top
    order = lambda v: sorted(shown, key=lambda i: (v.positions[i][0], i))  # noqa: E731
    assert order(default) == order(every), "the same left-to-right order"


def test_the_forest_opens_fitted_to_the_drawn_nodes_and_their_arcs(demo_traces):
    import json
    import re

    from tmem.viz.question.forest import forest_html

    traces, gold, frame = demo_traces
    trace, topics = traces["full"], dict(zip(frame["id"], frame["topic"]))
    page = forest_html(trace, gold, topics)
    drawn = json.loads(re.search(r"drawn = (\[[^\]]*\]);", page).group(1))
    view = forest_view(trace, gold, topics)
    assert sorted(drawn) == sorted(i for i in view.positions if i not in view.hidden)
    assert "open(); }, 80)" in page and "fitBox(opening)" in page
    whole = json.loads(re.search(r"var whole = (\[[^\]]*\]), opening", page).group(1))
    xs = [view.positions[i][0] for i in drawn]
    assert whole[0] < min(xs) and whole[2] > max(xs), "the fitted box holds every drawn node's box"


def test_an_update_label_shows_the_changed_value_not_the_shared_opening(demo_traces):
    """Issue 42, item 5: "OK, we drop contract checks against the…" was cut before the new state."""
    from tmem.viz.question.forest import forest_network
    from tmem.viz.question.forest_view import changed_words

    assert changed_words("OK, we drop contract checks against the Contoso sandbox and switch to shadow traffic.",
                         "Decision = contract checks against the Contoso sandbox.") == \
        "… and switch to shadow traffic."
    assert changed_words("Hello there, all", "Something else entirely") == "Hello there, all"
    traces, gold, frame = demo_traces
    net = forest_network(traces["full"], gold, dict(zip(frame["id"], frame["topic"])))
    revision = next(n for n in traces["full"].nodes if n.message_id == "Msg_2100")
    label = next(d["label"] for d in net.nodes if d["id"] == revision.index)
    assert "shadow traffic at 20%" in label, label


def test_the_curated_forest_stars_the_chain_its_answer_used_and_folds_what_is_unrelated(demo_traces):
    """Issue 42, item 5 on the demo's curated question: the ★ chain was the root-to-answer path plus the flat
    answer's best match (9 messages); the default view fitted 36 nodes (24 of the gold tree, 12 unrelated single
    messages) at an unreadable scale."""
    from tmem.viz.question.forest_view import FOLD_ABOVE

    traces, gold, frame = demo_traces
    trace, topics = traces["full"], dict(zip(frame["id"], frame["topic"]))
    ids = {n.index: n.message_id for n in trace.nodes}
    assert {ids[i] for i in answer_chain(trace)} == {"Msg_1497", "Msg_2100"}
    view = forest_view(trace, gold, topics)
    assert view.drawn <= FOLD_ABOVE and view.folded_singles > 0 and view.strip == ()
    every = forest_view(trace, gold, topics, show_all=True)
    assert every.drawn > FOLD_ABOVE and every.strip, "All trees still draws every tree and the strip"
    matter = {n.index for n in trace.nodes if n.tree in view.shown_trees}
    assert set(every.opens_on) == matter, "a crowded All trees opens on the trees that matter"


def test_the_fitted_box_holds_every_arc(demo_traces):
    """UPDATE arcs routed around a node bulge beyond the boxes: fitting to the nodes alone cut them off the top."""
    from tmem.viz.question.forest_view import BOX_H, _edge_path, edge_routes, fit_bounds

    traces, gold, frame = demo_traces
    trace, topics = traces["full"], dict(zip(frame["id"], frame["topic"]))
    view = forest_view(trace, gold, topics, show_all=True)
    routes = edge_routes(trace, view)
    shown = [i for i in view.positions if i not in view.hidden]
    left, top, right, bottom = fit_bounds(trace, view, routes, shown)
    boxes_top = min(view.positions[i][1] for i in shown) - BOX_H / 2
    arcs = [_edge_path(view.positions[n.parent_index], view.positions[n.index], routes[n.index])
            for n in trace.nodes if routes.get(n.index)]
    assert arcs, "the demo's forest has routed arcs"
    assert all(left <= x <= right and top <= y <= bottom for path in arcs for x, y in path)
    assert top < boxes_top - 50, "All trees: arcs reach well above the top row of boxes"
