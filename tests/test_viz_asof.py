"""tmem.viz.question.asof: the state each UPDATE chain held at a moment, computed by hand on a small forest."""
from __future__ import annotations

from datetime import datetime

import pytest

from tmem.types import EXPAND, ROOT, UPDATE, ForestNode
from tmem.viz.question.asof import (
    CURRENT,
    NOT_YET,
    SUPERSEDED,
    asof_table,
    moment_bounds,
    moment_from_param,
    moment_param,
    state_as_of,
    update_chains,
)


def _n(index, parent, relation, day, tree=1, text="state"):
    return ForestNode(index, parent, relation, 0, tree, f"m{index}", datetime(2025, 3, day), "ann", f"{text} {index}")


# m1 (Mar 1) --UPDATE--> m2 (Mar 5) --UPDATE--> m4 (Mar 10); m2 --EXPAND--> m3 (Mar 6);
# m1 --UPDATE--> m5 (Mar 7): a second chain sharing m1; m6 is a tree without updates.
NODES = [_n(1, 0, ROOT, 1), _n(2, 1, UPDATE, 5), _n(3, 2, EXPAND, 6), _n(4, 2, UPDATE, 10), _n(5, 1, UPDATE, 7),
         _n(6, 0, ROOT, 2, tree=2)]


def _ids(nodes):
    return [n.message_id for n in nodes]


def test_chains_follow_update_edges_only_and_branch():
    assert [_ids(c) for c in update_chains(NODES)] == [["m1", "m2", "m4"], ["m1", "m5"]]
    assert update_chains([_n(1, 0, ROOT, 1), _n(2, 1, EXPAND, 2)]) == []


@pytest.mark.parametrize("day,held,earlier,later,status", [
    (3, "m1", [], ["m2", "m4"], SUPERSEDED),
    (5, "m2", ["m1"], ["m4"], SUPERSEDED),  # a state stated exactly at the moment already holds
    (8, "m2", ["m1"], ["m4"], SUPERSEDED),
    (12, "m4", ["m1", "m2"], [], CURRENT),
])
def test_state_as_of(day, held, earlier, later, status):
    chain = update_chains(NODES)[0]
    state = state_as_of(chain, datetime(2025, 3, day))
    assert state.held.message_id == held and _ids(state.earlier) == earlier and _ids(state.later) == later
    assert state.status == status


def test_before_the_first_state_nothing_holds():
    state = state_as_of(update_chains(NODES)[0], datetime(2025, 2, 1))
    assert state.held is None and state.status == NOT_YET and _ids(state.later) == ["m1", "m2", "m4"]


def test_table_one_row_per_chain():
    table = asof_table(NODES, datetime(2025, 3, 8), {"m1": "launch"})
    assert list(table["chain"]) == ["U1", "U2"] and list(table["topic"]) == ["launch", "launch"]
    first, second = table.iloc[0], table.iloc[1]
    assert first["message"] == "m2" and first["superseded by"] == "m4 (2025-03-10 00:00)"
    assert first["earlier states"] == 1 and first["status"] == SUPERSEDED
    assert second["message"] == "m5" and second["superseded by"] == "—" and second["status"] == CURRENT
    before = asof_table(NODES, datetime(2025, 2, 1))
    assert before["status"].str.startswith(NOT_YET).all() and (before["superseded by"] == "—").all()
    assert (before["topic"] == "—").all()


def test_bounds():
    assert moment_bounds(NODES) == (datetime(2025, 3, 1), datetime(2025, 3, 10))
    assert moment_bounds([_n(1, 0, ROOT, 1)]) is None


@pytest.mark.parametrize("moment", [datetime(2025, 3, 5, 14), datetime(2025, 3, 5, 14, 7, 33),
                                    datetime(2025, 3, 5, 14, 7, 33, 250_000)])
def test_a_moment_round_trips_through_the_url_exactly(moment):
    bounds = moment_bounds(NODES)
    assert moment_from_param(moment_param(moment), bounds) == moment
    assert moment_param(datetime(2025, 3, 5, 14)) == "2025-03-05T14:00:00"


@pytest.mark.parametrize("text,expected", [
    ("2025-03-08", datetime(2025, 3, 8)),  # a date alone: its midnight
    ("2025-03-08T14:00+02:00", datetime(2025, 3, 8, 12)),  # an offset is read as the UTC time it names
    ("2025-03-08T14:00Z", datetime(2025, 3, 8, 14)),
    ("2025-02-01T00:00", None),  # before the first state: outside the forest's moments
    ("2025-03-10T00:00:01", None),  # after the last
    ("yesterday", None), ("", None), (None, None), ("2025-13-40", None),
])
def test_a_link_moment_is_read_or_ignored(text, expected):
    assert moment_from_param(text, moment_bounds(NODES)) == expected


def test_no_bounds_no_moment():
    assert moment_from_param("2025-03-08", None) is None


def test_the_moments_to_pick_are_the_times_states_were_stated():
    """A 90-minute chat with states at 11:00, 11:20, 11:50 and 12:30 has four positions (an hourly slider had two,
    labelled 11:50 at 11:20); two states stated at the same time share one position."""
    from datetime import timedelta

    from tmem.viz.question.asof import moments, snap

    t0 = datetime(2025, 3, 1, 11)
    at = lambda i, parent, rel, minutes: ForestNode(i, parent, rel, 0, 1, f"m{i}", t0 + timedelta(minutes=minutes),  # noqa: E731
                                                    "ann", f"state {i}")
    nodes = [at(1, 0, ROOT, 0), at(2, 1, UPDATE, 20), at(3, 2, UPDATE, 50), at(4, 3, UPDATE, 90),
             at(5, 1, UPDATE, 50), at(6, 1, EXPAND, 30)]
    assert moments(nodes) == [(t0, "m1"), (t0 + timedelta(minutes=20), "m2"),
                              (t0 + timedelta(minutes=50), "m3, m5"), (t0 + timedelta(minutes=90), "m4")]
    times = [t for t, _ in moments(nodes)]
    assert snap(t0 + timedelta(minutes=49), times) == t0 + timedelta(minutes=20)
    assert snap(t0 + timedelta(minutes=50), times) == t0 + timedelta(minutes=50)
    assert snap(t0 - timedelta(minutes=1), times) is None
    assert moments([at(1, 0, ROOT, 0)]) == []


def test_machine_made_ids_are_named_by_author_and_time():
    from tmem.viz.question.asof import moment_label, moments

    slack = [ForestNode(1, 0, ROOT, 0, 1, "random/1747299960.000000", datetime(2025, 5, 15, 9, 6), "ana",
                        "We go with Postgres."),
             ForestNode(2, 1, UPDATE, 1, 1, "random/1747303560.000000", datetime(2025, 5, 15, 10, 6), "bo",
                        "Change of plan: we go with SQLite instead.")]
    (t, ids), _ = moments(slack)
    assert moment_label(t, ids, slack) == "2025-05-15 09:06 · ana"
    table = asof_table(slack, datetime(2025, 5, 15, 9, 30))
    assert table["message"].iloc[0] == "ana · May 15 09:06" and "bo · May 15 10:06" in table["superseded by"].iloc[0]


def test_opening_moment_is_just_before_the_latest_change_of_the_questions_chain():
    from tmem.viz.question.asof import opening_moment, relevant_chain

    assert [n.message_id for n in relevant_chain(NODES, {"m5"})] == ["m1", "m5"]
    assert opening_moment(NODES, {"m5"}) == datetime(2025, 3, 1)  # m1, which m5 replaced
    assert opening_moment(NODES) == datetime(2025, 3, 5)  # no question ids: the chain that changed last (m2 -> m4)
    assert opening_moment([_n(1, 0, ROOT, 1)]) is None


def test_the_state_strip_shows_the_changed_words_and_the_edge():
    from tmem.viz.question.asof import state_strip

    chain = update_chains(NODES)[0]
    strip = state_strip(chain, {"m2": (0.8, "r")}, "offline:fitted-relation", "0.553 (held-out cases)")
    assert list(strip["step"]) == [1, 2, 3] and strip["edge"].iloc[0] == "first state"
    assert strip["edge"].iloc[1] == "UPDATE of m1 (confidence 0.80)" and strip["edge"].iloc[2] == "UPDATE of m2"
    assert strip["built by"].iloc[0] == "—" and strip["role's UPDATE precision"].iloc[1] == "0.553 (held-out cases)"
