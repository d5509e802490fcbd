"""The revision layer of the default relation role (tmem/models/relation/revision.py, issue 38): an explicit revision
that names a new value for a slot stated earlier is an UPDATE of the slot's latest state (the chain's tip), in
chains of three to five statements written here by hand in six registers. Each thread is structured as the pipeline
does (link_parents over the whole thread, the default rule), and every expected edge below was worked out by hand
from the text: each revision replaces the state stated right before it in its own chain."""
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from tmem.config import StructuringConfig
from tmem.models.embedders import LexicalEmbedder
from tmem.models.relation import rule_for
from tmem.models.relation.revision import (
    Thresholds,
    calls_off,
    old_values,
    revise,
    revision_cue,
    slot_reason,
    slot_values,
    states_slot,
    status_of,
    withdrawn,
)
from tmem.models.relation.values import cues, withdraws
from tmem.pipeline.scope import Scope
from tmem.pipeline.structuring import link_parents
from tmem.types import UPDATE, Message, Question

T0 = datetime(2026, 3, 2, 9)


def thread(rows, minutes=30):
    """Messages of one thread from (id, author, text[, reply_to]) rows, `minutes` apart."""
    return [Message(r[0], "s", r[2], T0 + timedelta(minutes=minutes * i), author=r[1],
                    reply_to=r[3] if len(r) > 3 else None) for i, r in enumerate(rows)]


def updates(messages):
    scope = Scope("c", "s", messages)
    role = rule_for(StructuringConfig(), LexicalEmbedder())
    result = link_parents(Question("q", "s", "what is the current plan?", None), messages, role, scope,
                          StructuringConfig())
    return {d.child_id: d.parent_id for d in result.decisions if d.relation == UPDATE}, result


ASSISTANT = thread([
    ("u1", "user", "I'm planning a birthday dinner on Saturday for 6 people. Any menu ideas?"),
    ("a1", "assistant", "Happy to help! For 6 people a slow-roast shoulder of lamb works well, with two sides."),
    ("u2", "user", "Two more friends said yes, so 8 people, not 6."),
    ("a2", "assistant", "Noted, I'll scale the shopping list to 8."),
    ("u3", "user", "One of them cancelled, make it 7 people."),
    ("u4", "user", "Actually back to 8 people, my cousin can come after all."),
])
TICKET = thread([
    ("b1", "bot", "[bot] Ticket #1042 created. Status: Open | Priority: P3"),
    ("g1", "agent", "Hi Sam, thanks for the report, I'm looking into the failed export now."),
    ("b2", "bot", "[bot] Status changed Open -> In Progress"),
    ("b3", "bot", "[bot] Status changed In Progress -> Blocked (waiting on the storage vendor)"),
    ("b4", "bot", "[bot] Status changed Blocked -> Resolved"),
], minutes=300)
STANDUP = thread([
    ("s1", "alice", "Payments API migration: on track for Friday."),
    ("x1", "bob", "Search reindex: still running, no blockers."),
    ("s2", "alice", "Payments API migration is delayed, the vendor sandbox is down. New target is Tuesday."),
    ("s3", "alice", "Payments API migration is blocked until the vendor renews our API keys."),
    ("s4", "alice", "Payments API migration done, the cutover finished this morning."),
], minutes=24 * 60)
MEETING = thread([
    ("n1", "pm", "Meeting notes 3 March: launch date is 14 April. Press kit owner is Dana."),
    ("n2", "pm", "Meeting notes 10 March: the launch date moved to 21 April, app review is slow."),
    ("n3", "pm", "Meeting notes 17 March: launch date moves again, now 28 April. Press kit owner unchanged."),
], minutes=7 * 24 * 60)
EMAIL = thread([
    ("e1", "ana", "Hi all, the team offsite will be in Lisbon on 12 June. Best, Ana"),
    ("e2", "ana", "> the team offsite will be in Lisbon on 12 June\nCorrection: the team offsite is in Porto, not "
                  "Lisbon. Same date. Ana"),
    ("e3", "ana", "> the team offsite is in Porto\nThe Porto venue fell through, so the team offsite is back to "
                  "Lisbon, still 12 June."),
    ("e4", "ana", "Update: the team offsite moves to 19 June, still in Lisbon."),
], minutes=24 * 60)
SOCIAL = thread([
    ("p1", "mia", "Picnic this Sunday at Riverside Park, 2pm! Bring snacks"),
    ("p2", "leo", "yay I'll bring lemonade"),
    ("p3", "mia", "change of plan: rain on Sunday, so the picnic moves to Saturday instead, same park, 2pm"),
    ("p4", "mia", "ugh, the park is booked on Saturday. picnic back to Sunday, at 3pm this time"),
], minutes=12 * 60)
# The upload case of issue 38: a decision, a challenge naming the other option, then the change of plan
UPLOAD = thread([
    ("d", "lead", "Decision: we go with Postgres for the new orders service."),
    ("c", "dev", "What about MySQL? The team knows it better and ops already runs it.", "d"),
    ("r", "lead", "Change of plan: we go with MySQL instead.", "c"),
])

CHAINS = {  # register -> the UPDATE edges, child -> parent, worked out by hand
    "assistant": (ASSISTANT, {"u2": "u1", "u3": "u2", "u4": "u3"}),
    "ticket": (TICKET, {"b2": "b1", "b3": "b2", "b4": "b3"}),
    "stand-up": (STANDUP, {"s2": "s1", "s3": "s2", "s4": "s3"}),
    "meeting notes": (MEETING, {"n2": "n1", "n3": "n2"}),
    "e-mail": (EMAIL, {"e2": "e1", "e3": "e2", "e4": "e3"}),
    "social": (SOCIAL, {"p3": "p1", "p4": "p3"}),
}


@pytest.mark.parametrize("register", sorted(CHAINS))
def test_each_revision_updates_the_latest_state_of_its_chain(register):
    messages, expected = CHAINS[register]
    built, result = updates(messages)
    assert built == expected
    for child in expected:  # the layer decided, and says so
        decision = next(d for d in result.decisions if d.child_id == child)
        assert decision.note.startswith("offline: revision layer: explicit revision")


def test_a_return_to_an_earlier_value_updates_the_state_it_replaces():
    built, _ = updates(ASSISTANT)
    assert built["u4"] == "u3"  # "back to 8": u3 (7) is replaced, not u2, which said 8 already
    built, _ = updates(EMAIL)
    assert built["e3"] == "e2"  # back to Lisbon replaces Porto, not the first Lisbon


@pytest.mark.parametrize("links", [True, False])
def test_a_change_of_plan_updates_the_decision_not_the_question_about_the_other_option(links):
    """With reply links (r answers the challenge c) and as an uploaded chat without them."""
    built, result = updates(UPLOAD if links else [replace(m, reply_to=None) for m in UPLOAD])
    assert built == {"r": "d"}
    assert next(d for d in result.decisions if d.child_id == "c").relation != UPDATE



def test_a_date_moved_from_one_day_to_another_after_a_call_revises_the_order():
    """"rang" is no report word (it read as "ran", so the call stated nothing) and "moves from the 3rd to the 9th"
    is revision wording: the order that stated the 3rd is the slot the call revises."""
    order = Message("o", "s", "printer toner ordered from OfficeHub, 6 cartridges, delivery 3rd Nov", T0,
                    author="ana")
    call = Message("c", "s", "OfficeHub rang: the toner delivery moves from the 3rd to the 9th, supplier delay",
                   T0 + timedelta(days=1), author="ben")
    assert revision_cue(call.text) == "moves from the 3rd to"
    assert revision_cue("the toner delivery moves from the depot") is None  # a route: no value it changes to
    found = revise(call, [order], [0.3])
    assert found is not None and found.parent.id == "o" and "names its value '3rd'" in found.reason

def test_the_readings_by_hand():
    assert revision_cue("Can we move it to Thursday instead?") is None  # a proposal is no revision
    assert revision_cue("[bot] Status changed Open -> Pending") is not None
    assert revision_cue("Session store replication FRA1 -> FRA7 still lags") is None  # a route, not a change
    assert old_values("two more said yes, so 8 not 6") == {"6"}
    assert {"open", "tier 1 queue"} <= old_values("Status changed Open -> Pending. Assignee changed Tier 1 queue "
                                                   "-> Dan")
    assert status_of("Fixed and closed, reopening if it comes back") == {"done", "reopened"}


def test_the_update_tip_switch_follows_a_chain_to_its_latest_state():
    """structuring.update_tip (off by default, measured on dev): a child built as an UPDATE of A, when B already
    UPDATEd A, is re-pointed at B; a tip outside the child's candidates is not taken."""
    from tmem.pipeline.structuring import follow_update_tips
    from tmem.types import EXPAND, ParentDecision

    def d(child, parent, relation=UPDATE):
        return ParentDecision(child, (), (), parent, relation, 0.5, "why")

    built = follow_update_tips([d("b", "a"), d("x", "a", EXPAND), d("c", "a"), d("e", "a")],
                               {"b": ["a"], "x": ["a", "b"], "c": ["a", "b", "x"], "e": ["a", "b", "x"]})
    assert [(x.child_id, x.parent_id) for x in built] == [("b", "a"), ("x", "a"), ("c", "b"), ("e", "b")]
    assert built[2].note == "why; chain tip: a was updated by b"
    # e: c is not among its candidates, so the walk stops at b; with c a candidate it goes on to c
    again = follow_update_tips([d("b", "a"), d("c", "a"), d("e", "a")], {"b": ["a"], "c": ["a", "b"],
                                                                         "e": ["a", "b", "c"]})
    assert [x.parent_id for x in again] == ["a", "b", "c"]


MINUTES = thread([
    ("m1", "scribe", "Notes from the 4 May committee meeting\n- Bake sale: Saturday 16 May, 9-12, in the school hall\n"
                     "- Membership fee stays at 20\n- Next meeting 1 June"),
    ("q1", "treasurer", "Correction to the notes: the fee is now 25, not 20. We voted on it at the end.", "m1"),
    ("q2", "parent", "> Bake sale: Saturday 16 May\nthe hall is taken that day, so the bake sale moves to Sunday "
                     "17 May", "m1"),
    ("q3", "scribe", "thanks both, noted", "q2"),
])


def test_notes_state_one_item_per_line_and_a_quote_names_the_value_replaced():
    # read whole, the notes only reaffirm ("stays at 20"): no slot, and a reply to them looked like a reply to a
    # question; read per line, the bake-sale line states a date
    assert not cues(MINUTES[0].text).new_state and states_slot(MINUTES[0].text)
    assert old_values(MINUTES[2].text) >= {"16", "saturday"}  # the quoted line holds the replaced value
    assert revision_cue("> the launch moved to Friday\nok, thanks") is None  # quoted wording is not the reply's
    found, result = updates(MINUTES)
    assert found == {"q1": "m1", "q2": "m1"}
    reasons = {d.child_id: d.note for d in result.decisions}
    assert "revision layer" in reasons["q1"] and "names its value" in reasons["q2"]


def test_lower_case_weekdays_are_dates_and_am_pm_is_a_time():
    assert ("date", "thursday") in slot_values("compost delivery moved to thursday, the driver is off")
    read = slot_values("it's back, half of us get the error again since 8am")
    assert ("time", "8am") in read and ("count", "8") not in read


def test_a_reply_naming_its_targets_value_beside_a_new_one_revises_it_at_a_lower_relevance():
    # the reply link and the old value named beside the new one tell the slot, so the statement replied to needs
    # only the own-statement floor (0.1, not 0.45); a reply that names no old value, or carries out a change the
    # statement replied to made itself, does not get it
    quote = Message("q", "s", "Renewal offer: 60 agents at $79 a month, starting Jan 1.", T0, author="ana")
    offer = Message("o", "s", "we're hiring, 60 is tight. make it 75 agents", T0 + timedelta(hours=1),
                    author="ben", reply_to="q")
    assert slot_reason(offer, quote, 0.3, Thresholds()) == "a new count for it (75)"
    assert revise(offer, [quote], [0.3]).parent.id == "q"
    assert slot_reason(replace(offer, text="make it 75 agents"), quote, 0.3, Thresholds()) is None  # no old value
    assert slot_reason(replace(offer, reply_to=None), quote, 0.3, Thresholds()) is None  # not a reply to it
    changed = replace(quote, text="Change of plan: 60 agents at $79 a month, starting Feb 1.")
    assert slot_reason(offer, changed, 0.3, Thresholds()) is None  # the statement is itself a change


def _thread(*turns):
    """Messages of one thread from (author, text, reply_to index or None), an hour apart, ids m0, m1, ..."""
    return [Message(f"m{i}", "s", text, T0 + timedelta(hours=i), author=author,
                    reply_to=None if to is None else f"m{to}") for i, (author, text, to) in enumerate(turns)]


def test_a_correction_naming_the_value_it_replaces_revises_its_statement_through_report_wording():
    # "it was 18 cleans, not 16" reads as a report ("was"), and "heads up, drop 2 is 12 pallets not 10" too ("heads
    # up"), so neither states a slot; the value named as replaced still tells which statement they correct
    invoice, correction = _thread(
        ("ana", "We are disputing the invoice: it bills 24 cleans, but our records show 16 visits.", None),
        ("omar", "I went back through the sign-in sheets: it was 18 cleans, not 16. Sorry!", 0))
    assert not states_slot(correction.text)
    assert revise(correction, [invoice], [0.3]).parent.id == "m0"
    run, heads_up = _thread(("dan", "run 3902 tomorrow: drop 1 14 pallets 09:00, drop 2 10 pallets 11:30", None),
                            ("lena", "heads up, drop 2 is 12 pallets not 10, they added two pallets", 0))
    assert revise(heads_up, [run], [0.3]).parent.id == "m0"
    # without the named value such a report revises nothing
    assert revise(replace(correction, text="I went back through the sign-in sheets: it was 18 cleans."),
                  [invoice], [0.3]) is None


def test_a_replys_one_value_replaces_the_one_its_target_set_at_the_own_statement_floor():
    # another speaker's reply bringing a new count for the one count its target set: the reply link and the single
    # value tell the slot, so relevance 0.29 (under the layer's 0.45) is enough
    ask, booked, fewer = _thread(("ben", "wait is uncle ray coming? thats 11 not 9", None),
                                 ("ana", "ugh yes ray + gemma. rang luigis, table for 11 now", 0),
                                 ("eve", "gemma's out with covid, make it 10", 1))
    assert revise(fewer, [ask, booked], [0.1, 0.29]).parent.id == "m1"  # the question before it sets nothing
    # not when the target repeats a value an earlier statement set ("11:30 is tight" about the run sheet's 11:30)
    run, tight, later = _thread(("dan", "run 3902 tomorrow: drop 1 Salford 09:00, drop 2 Oldham 11:30", None),
                                ("kim", "stockport adds 25 min, 11:30 is tight", 0),
                                ("lee", "make it 12:00 then", 1))
    assert revise(later, [run, tight], [0.2, 0.29]) is None
    # nor when the target states two values of the kind: which one changes is not plain
    two = replace(booked, text="rang luigis, table for 11 now, and 2 high chairs")
    assert revise(fewer, [ask, two], [0.1, 0.29]) is None


def test_a_plan_called_off_updates_its_latest_statement_or_the_statement_of_the_day_it_names():
    plan, moved, booked, off = _thread(
        ("ana", "ok so mums 60th dinner: sat 14th, 6pm, luigis. ill book. whos in", None),
        ("ana", "still saturday but 7 not 6 then", 0),
        ("ana", "rang luigis, table for 11 now", 0),
        ("ana", "luigis just rang, kitchen fire, theyre shut saturday so our booking is cancelled", None))
    # called off as it stands: the latest statement of the booking, not the first one, whose "sat" reads as
    # another date than "saturday"
    assert revise(off, [plan, moved, booked], [0.35, 0.31, 0.32]).parent.id == "m2"
    rota, rain = _thread(("nadia", "carpool this wk: mon me, tue mark, wed nadia, thu greg. practice 4.30-6", None),
                         ("greg", "tue practice cancelled, rain", None))
    assert revise(rain, [rota], [0.35]).parent.id == "m0"  # another speaker's, under 0.45: the day names it
    assert revise(replace(rain, text="practice cancelled, rain"), [rota], [0.35]) is None
    # a cancellation that is the old side of a change, or beside other change wording, calls nothing off
    assert calls_off("tue practice cancelled, rain") == {"cancelled"}
    assert not calls_off("[TMS] Load 6208 status: Cancelled -> Booked. Deliver Thu 14 May")
    assert not calls_off("and the guy who cancelled is coming after all lol, back to 8")


def test_a_return_updates_the_latest_statement_that_named_its_value_as_replaced():
    # "back to 4" undoes "8 business hours, not 4", which brings no value the return lacks (it states 8 and 4), so
    # without the named value the layer attached the return to the first statement of 4
    policy, dry_run, back = _thread(
        ("ana", "New escalation policy: P1 after 30 minutes, P2 after 4 business hours.", None),
        ("ana", "P2 tickets escalate after 8 business hours, not 4. The dry run was not sustainable.", 0),
        ("ana", "Enterprise P2s go back to 4 business hours. Everyone else stays on 8.", None))
    assert revise(back, [policy, dry_run], [0.34, 0.3]).parent.id == "m1"
    # where no later statement names 4 as the value it replaced, the return still undoes the speaker's latest
    # statement of the slot without 4 (tenth pass: the head holds the 4 it goes back to, so it is not the state
    # the return replaces)
    plain = replace(dry_run, text="P2 tickets escalate after 8 business hours from Monday.")
    assert revise(back, [policy, plain], [0.34, 0.3]).parent.id == "m1"
    # another speaker's objection without the value is no state of the speaker's the return undoes
    objection = Message("o", "s", "8 business hours on a P2 means an Enterprise customer waits a full day.",
                        T0 + timedelta(hours=1, minutes=30), author="ben")
    assert revise(back, [policy, objection], [0.34, 0.6]).parent.id == "m0"


def test_a_return_to_the_value_the_head_holds_updates_the_speakers_later_statement_without_it():
    # "back to 4" after "ok 4 it is" and "3.30 works": the head (most relevant) states the 4 it goes back to; the
    # state it undoes is the speaker's later "3.30 works"
    pickup, four, ask, half, back = _thread(
        ("ana", "who can do pickup fri? 4pm at the school gate", None),
        ("eve", "ok 4 it is", 0),
        ("ana", "could you do 3.30 instead?", 1),
        ("eve", "3.30 works", 2),
        ("eve", "ugh boss wants me til 4 on fri. back to 4, sorry", None))
    found = revise(back, [pickup, four, ask, half], [0.3, 0.62, 0.2, 0.11])
    assert found.parent.id == "m3"
    assert revise(replace(back, text="ugh boss wants me til 4 on fri. make it 4 instead, sorry"),
                  [pickup, four, ask, half], [0.3, 0.62, 0.2, 0.11]).parent.id == "m1"


def test_a_count_after_a_colon_is_no_day_of_the_date_before_it():
    # "40" stood within a few characters of "12 June" and was read as a day of the month: a date of 40
    read = slot_values("Friday 12 June: 40 seats")
    assert ("count", "40") in read and ("date", "40") not in read
    assert {("date", "12"), ("date", "jun"), ("date", "friday")} <= read
    # a number inside the date stays a day, a range ending in one and the year after one too
    assert ("date", "14-18") in slot_values("ok so not 12-16, it'll be 14-18 may")
    assert ("date", "2026") in slot_values("Hard shutdown Jun 30 2026.")
    # a quiz night of 40 seats moved to the 13th: the 13th replaces the 12th, not a 40th
    plan, moved = _thread(("ana", "Quiz night: Friday 12 June: 40 seats in the back room", None),
                          ("ana", "Quiz night moved to Saturday 13 June", None))
    assert "(13, saturday)" in revise(moved, [plan], [0.5]).reason


def test_a_booking_told_in_the_past_tense_states_the_plan_it_books():
    # "booked" read as a report of something done (past tense, nothing present), so the booking stated no slot
    # and a later move of it had nothing to revise
    assert states_slot("booked the hall for the 3rd, 7pm") and ("date", "3") in slot_values("booked the hall for "
                                                                                              "the 3rd, 7pm")
    assert not states_slot("7 people booked on the 14th")  # a count of bookings taken is a report
    booking, moved = _thread(("ana", "booked the hall for the 3rd, 7pm", None),
                             ("ben", "the hall moved to the 10th, same time", None))
    assert revise(moved, [booking], [0.5]).parent.id == "m0"


def test_a_message_withdrawn_by_its_author_is_no_state_and_the_withdrawal_revises_nothing():
    plan, stray, sorry, moved = _thread(("ana", "Quiz night: Friday 12 June, back room", None),
                                        ("ana", "can you grab milk on the way home, we need 2 litres", None),
                                        ("ana", "sorry wrong chat 🙈", None),
                                        ("ana", "Quiz night moved to Saturday 13 June instead of the 12th", None))
    assert withdraws("sorry wrong chat 🙈") and withdraws("ignore that, wrong group")
    assert not withdraws("disregard the above re Alvarez, he rang back, he's keeping the 27th 11:40")
    assert withdrawn([plan, stray, sorry]) == {1, 2}
    # the stray message is the speaker's latest, and the most relevant here: withdrawn, it is no slot's state
    assert revise(moved, [plan, stray, sorry], [0.5, 0.6, 0.1]).parent.id == "m0"
    assert revise(replace(sorry, text="sorry wrong chat, ignore that"), [plan, stray], [0.5, 0.5]) is None
    # the fitted layer left the withdrawal to itself; the default builds no UPDATE of it, nor from it
    built, _ = updates([plan, stray, sorry, moved])
    assert built == {"m3": "m0"}


def test_thanks_to_someone_states_no_value():
    # "thanks Pete" read a name, so a correction of the rota by its author took it as the latest state of the slot
    assert not states_slot("thanks Pete ❤️") and not cues("thanks Pete ❤️").states
    rota, thanks, correction = _thread(
        ("ana", "On-call next week: Mon Chidi, Tue Maja, Wed Chidi, Thu Maja, Fri Chidi.", None),
        ("ana", "thanks Pete ❤️", None),
        ("ana", "Correction to the rota: Mon is Maja not Chidi, I had last week's sheet open", None))
    # the rota holds both names, so no value is new to it; the correction names the one it replaces ("not Chidi"),
    # which the rota states: it UPDATEs the rota, never the thanks
    assert revise(correction, [rota, thanks], [0.3, 0.11]).parent.id == "m0"


def test_a_name_said_to_be_replaced_is_read_whole_and_a_code_is_no_name():
    assert old_values("Change of plan for the bedroom: Pigeon Grey not Hardwick White, too cold") == {"hardwick white"}
    assert old_values("we'll take the Ford Focus instead of the Vauxhall Corsa") == {"vauxhall corsa"}
    # a code of letters and digits names a record, never its letters: no 'inv', no 'inv-40917'
    assert old_values("the credit went against INV-52210 instead of INV-52277, so it still shows as open") == set()
    colour, question, change = _thread(
        ("ana", "Bedroom colour: we're going with Hardwick White", None),
        ("ben", "Is Hardwick White not too dark for a north room?", None),
        ("ana", "Change of plan for the bedroom: Pigeon Grey not Hardwick White", None))
    # the question names the colour too, but asks about it: the statement that holds it is the one replaced
    found = revise(change, [colour, question], [0.5, 0.6])
    assert found.parent.id == "m0" and "names its value 'hardwick white'" in found.reason
