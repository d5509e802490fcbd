"""The state rule where a chat marks no reply link (tmem/models/relation/state.py `_reply_less`, `_agrees`; the
signals of tmem/models/relation/signals.py): what a message answers is read from its words and the turns before it.
Hand-written issue-tracker and chat turns; expectations worked out by hand from the rules' docstrings."""
from datetime import datetime, timedelta

from tmem.config import StructuringConfig
from tmem.models.relation import RevisionFirstRelation, StateRelation
from tmem.models.relation.signals import (
    AGREES,
    MANY_SPEAKERS,
    changed_fields,
    command_verbs,
    first_names,
    only_fields,
    removed_values,
    replies_marked,
)
from tmem.models.relation.state import CALIBRATION
from tmem.pipeline.scope import Scope
from tmem.types import EXPAND, NONE, UPDATE, Message, Question

T0 = datetime(2026, 5, 4, 9)
Q = Question("q", "t", "What is the status of the crash report?", "u")


def m(mid, minute, text, author, reply_to=None):
    return Message(mid, "t", text, T0 + timedelta(minutes=minute), author=author, reply_to=reply_to)


REPORT = m("r1", 0, "The exporter crashes on files larger than 2 GB, traceback attached.", "ana")
GREETING = m("r2", 1, "Labels added: `bug`, `needs-triage`", "trackerbot")
TRIAGE = m("r3", 30, "Reproduced on the main branch.\n/label confirmed\n/remove-label needs-triage", "lee")
ASK = m("r4", 40, "I'm away next week, @k-marsh can you take this one?\n/assign @k-marsh", "lee")
YES = m("r5", 42, "sure, on it", "kim")
PROGRESS = m("r6", 90, "Label `in progress` added (linked change #88)", "trackerbot")
CLOSE = m("r7", 300, "Change #88 landed. Label `fixed` added, `in progress` removed.", "trackerbot")
REOPEN = m("r8", 400, "/reopen\nstill fails with 3 GB files on the nightly", "lee")
ECHO = m("r9", 401, "Issue reopened by @lee. Label `fixed` removed.", "trackerbot")
THREAD = [REPORT, GREETING, TRIAGE, ASK, YES, PROGRESS, CLOSE, REOPEN, ECHO]


def state_choice(child, thread=THREAD, role=None):
    role = role or StateRelation.from_config(StructuringConfig())
    candidates = [x for x in thread if x.timestamp < child.timestamp]
    [choice] = role.label_pairs(Q, child, candidates, Scope("c", "t", thread)).choices
    return choice


def test_the_signals_read_removed_values_fields_commands_and_agreement():
    assert removed_values(TRIAGE.text) == {"needs-triage"}
    assert removed_values(CLOSE.text) == {"in progress"}  # `fixed` is added, not removed
    assert removed_values("Labels removed: `stale`, `wontfix`") == {"stale", "wontfix"}
    assert removed_values("/unassign @kim") == {"kim"}
    assert removed_values("I removed the old kernel and rebooted") == set()  # nothing named as a value
    assert changed_fields(GREETING.text) == {"label"} == changed_fields(PROGRESS.text) == changed_fields(TRIAGE.text)
    assert changed_fields("Milestone set: v2.1") == {"milestone"}
    assert changed_fields("Status changed Open -> Pending") == {"status"}
    assert changed_fields("I set it up yesterday, the code changed a lot") == set()  # no field named first
    assert changed_fields("/usr/bin is set") == set()  # a path, not a command
    assert command_verbs(REOPEN.text) == {"reopen"} and command_verbs(ECHO.text) == set()
    assert all(AGREES.match(t) for t in ("+1, good idea", "sure, on it", "LGTM", "👍 updating the notes", "fair",
                                         "confirmed fixed on the nightly"))
    assert not any(AGREES.match(t) for t in ("okular crashes too", "surely not", "the fix is fine"))


def test_replies_marked_reads_the_whole_conversation():
    assert not replies_marked(Scope("c", "t", THREAD), THREAD)
    answered = m("x", 500, "which nightly?", "kim", reply_to="r8")
    assert replies_marked(Scope("c", "t", [*THREAD, answered]), THREAD)  # 1 of 10 messages links: marked
    chatter = [m(f"z{i}", 600 + i, f"note {i}", "ana") for i in range(2)]
    assert not replies_marked(Scope("c", "t", [*THREAD, answered, *chatter]), THREAD)  # 1 of 12: a flat thread


def test_a_value_taken_away_by_name_updates_the_message_that_set_it():
    choice = state_choice(TRIAGE)
    assert (choice.parent_id, choice.relation) == ("r2", UPDATE) and "takes away 'needs-triage'" in choice.reason
    choice = state_choice(CLOSE)  # `in progress` was set by r6, not by the triage
    assert (choice.parent_id, choice.relation) == ("r6", UPDATE)
    mention = m("r6b", 100, "is in progress really right? nothing moved yet", "sam")
    choice = state_choice(CLOSE, [*THREAD[:6], mention, CLOSE])  # a later mention did not set it: r6 still did
    assert (choice.parent_id, choice.relation) == ("r6", UPDATE)
    assert abs(choice.confidence - CALIBRATION["field"]) <= 0.05


def test_a_field_set_again_updates_the_latest_message_that_set_it():
    choice = state_choice(PROGRESS)  # r3 set the label last (r4 assigns, r5 agrees)
    assert (choice.parent_id, choice.relation) == ("r3", UPDATE) and "field 'label'" in choice.reason
    first = state_choice(GREETING)  # nothing set a label before: no field reading
    assert "field" not in first.reason


def test_a_report_echoing_the_command_before_it_expands_the_command():
    choice = state_choice(ECHO)  # not an UPDATE of r7, whose `fixed` it removes: it carries out r8's /reopen
    assert (choice.parent_id, choice.relation) == ("r8", EXPAND) and "'/reopen'" in choice.reason


def test_a_yes_to_a_request_answers_it_and_a_plain_agreement_is_less_sure_in_an_open_log():
    choice = state_choice(YES)  # "sure," names no one, and @k-marsh is no author here: the request before it
    assert (choice.parent_id, choice.relation) == ("r4", EXPAND)
    assert choice.confidence >= 0.5 and "question or request" in choice.reason
    plus = m("p", 2, "+1, hit the same crash on my laptop", "sam")
    choice = state_choice(plus, [REPORT, GREETING, plus])  # the bot's label line is an agreement's target too
    assert choice.relation == EXPAND and choice.parent_id in {"r1", "r2"}
    # among three speakers a plain agreement most often takes up the turn before it (oss and renovation dev)
    assert choice.confidence >= 0.5 and "agrees with" in choice.reason
    # in an open log of more than MANY_SPEAKERS speakers it is less sure (IRC dev: 5 of 18)
    crowd = [m(f"z{i}", 600 + i, "morning all", f"user{i}") for i in range(MANY_SPEAKERS)]
    choice = state_choice(plus, [REPORT, GREETING, plus, *crowd])
    assert choice.relation == EXPAND and choice.confidence < 0.5 and "agrees with" in choice.reason
    changes = m("c", 43, "ok, moving it to next sprint instead", "kim")
    assert "agrees" not in state_choice(changes).reason  # it says it changes something: not an agreement
    several = m("s", 43, "thanks!\nthe new build fails too, log below", "kim")
    assert "agrees" not in state_choice(several).reason  # a turn of several lines says more than that


def test_the_readings_stay_off_where_replies_are_marked_and_in_the_fitted_features():
    answered = m("x", 500, "which nightly?", "kim", reply_to="r8")
    marked = [*THREAD, answered]
    assert "takes away" not in state_choice(TRIAGE, marked).reason
    assert state_choice(YES, marked).relation == NONE
    # StateRelation() is the fitted role's rule (tmem/models/relation/fitted.py): its weights were fitted without
    # these readings
    assert state_choice(TRIAGE, role=StateRelation()).relation == NONE


def test_the_default_takes_a_confident_reading_where_its_fitted_layer_roots():
    role = RevisionFirstRelation.from_config(StructuringConfig())
    candidates = [x for x in THREAD if x.timestamp < TRIAGE.timestamp]
    [choice] = role.label_pairs(Q, TRIAGE, candidates, Scope("c", "t", THREAD)).choices
    assert (choice.parent_id, choice.relation) == ("r2", UPDATE) and "state layer" in choice.reason


def test_the_default_lets_a_reading_as_precise_as_its_revision_layer_decide_first():
    role = RevisionFirstRelation.from_config(StructuringConfig())

    def default_choice(child, thread=THREAD):
        candidates = [x for x in thread if x.timestamp < child.timestamp]
        [choice] = role.label_pairs(Q, child, candidates, Scope("c", "t", thread)).choices
        return choice
    # a field taken away or set again (dev precision 0.85, the revision layer's 0.8) decides before both layers
    for child, parent in ((CLOSE, "r6"), (PROGRESS, "r3")):
        choice = default_choice(child)
        assert (choice.parent_id, choice.relation) == (parent, UPDATE)
        assert "at least as precise on dev as the revision layer" in choice.reason
    # a report echoing a command (0.6) does not: the layers decide as before
    assert "at least as precise" not in default_choice(ECHO).reason
    # nor does any reading where replies are marked
    answered = m("x", 500, "which nightly?", "kim", reply_to="r8")
    assert "at least as precise" not in default_choice(CLOSE, [*THREAD, answered]).reason


# A job chat of three people without reply links (hand-written): the contractor offers two sizes, an owner picks one
OFFER = m("j1", 0, "Shower tray: 1200x800 as discussed or 1400 for a proper walk-in, +£150", "mick")
PICK = m("j2", 25, "1400 please!", "tom")
JOB = [OFFER, PICK]


def test_a_turn_nothing_else_places_takes_up_the_turn_before_it_among_few_speakers():
    choice = state_choice(PICK, JOB)
    assert (choice.parent_id, choice.relation) == ("j1", EXPAND) and "turn just before it" in choice.reason
    assert choice.confidence >= 0.5  # 16 of 26 right on oss and renovation dev: the default takes it
    late = m("j2", 60 * 5, "1400 please!", "tom")  # five hours on: no longer the turn it answers
    assert state_choice(late, [OFFER, late]).relation == NONE
    aside = m("j2", 25, "btw did anyone book the skip?", "tom")  # an aside starts a thread of its own
    assert state_choice(aside, [OFFER, aside]).relation == NONE
    own = m("j2", 25, "1400 please!", "mick")  # the speaker's own turn before: no one else's turn to take up
    assert "turn just before" not in state_choice(own, [OFFER, own]).reason
    # a tracker's bookkeeping in between is skipped: the turn taken up is the offer
    assert only_fields("/milestone v0.14.1") and not only_fields(OFFER.text)
    bot = m("j1b", 10, "/milestone v0.14.1", "trackerbot")
    assert state_choice(PICK, [OFFER, bot, PICK]).parent_id == "j1"
    # in an open log of many speakers the turn before need not be the one answered: no such reading
    crowd = [m(f"z{i}", 600 + i, "morning all", f"user{i}") for i in range(MANY_SPEAKERS)]
    assert "turn just before" not in state_choice(PICK, [*JOB, *crowd]).reason
    # nor where replies are marked (a missing link there says the turn answers no one in particular)
    marked = [OFFER, m("j2", 25, "1400 please!", "tom"), m("j3", 30, "noted", "mick", reply_to="j2")]
    assert "turn just before" not in state_choice(marked[1], marked).reason


def test_a_quote_expands_the_message_it_quotes_not_the_latest_one():
    plan = m("q1", 0, "we're going back to the original plan for 0.15.x: polling only, no watchdog.", "ana")
    other = m("q2", 20, "CI is green again on main", "lee")
    asks = m("q3", 30, "> polling only, no watchdog\n\ncan the polling interval at least be configurable?", "kim")
    choice = state_choice(asks, [plan, other, asks])
    assert (choice.parent_id, choice.relation) == ("q1", EXPAND) and "quotes q1" in choice.reason
    assert choice.confidence >= 0.7


def test_the_default_takes_the_turn_before_where_its_fitted_layer_roots():
    role = RevisionFirstRelation.from_config(StructuringConfig())
    [choice] = role.label_pairs(Q, PICK, [OFFER], Scope("c", "t", JOB)).choices
    assert (choice.parent_id, choice.relation) == ("j1", EXPAND) and "turn just before" in choice.reason


def test_a_progress_report_updates_the_same_speakers_latest_report_among_few_speakers():
    stripped = m("k1", 0, "Strip out done ✅ skip collected", "mick")
    quote = m("k2", 30, "£180 for the damp treatment, so £8,580 labour all in now", "mick")  # no report of progress
    nice = m("k3", 40, "great, thanks", "tom")
    first_fix = m("k4", 60 * 24, "First fix done, electrician signed it off", "mick")
    chat = [stripped, quote, nice, first_fix]
    choice = state_choice(first_fix, chat)
    assert (choice.parent_id, choice.relation) == ("k1", UPDATE) and "reports progress" in choice.reason
    assert choice.confidence >= 0.8  # 8 of 9 on renovation dev
    # the default takes it where its fitted layer roots, but not ahead of its revision layer, which reads status
    # wording too: a field line does decide first
    default = RevisionFirstRelation.from_config(StructuringConfig())
    [choice] = default.label_pairs(Q, first_fix, chat[:3], Scope("c", "t", chat)).choices
    assert (choice.parent_id, choice.relation) == ("k1", UPDATE) and "state layer" in choice.reason
    assert "at least as precise" not in choice.reason
    # another speaker's report is not this speaker's state; a question asks, it reports nothing
    other = m("k4", 60 * 24, "First fix done, electrician signed it off", "tom")
    assert "reports progress" not in state_choice(other, [stripped, quote, nice, other]).reason
    asks = m("k4", 60 * 24, "is first fix done yet?", "mick")
    assert "reports progress" not in state_choice(asks, [stripped, quote, nice, asks]).reason
    # in an open log of many speakers no such reading
    crowd = [m(f"z{i}", 3000 + i, "morning all", f"user{i}") for i in range(MANY_SPEAKERS)]
    assert "reports progress" not in state_choice(first_fix, [*chat, *crowd]).reason


# A job chat whose authors are handles (an export's "User_3"), while the text speaks to people by first name
# (hand-written): the owner thanks the contractor, the supplier greets an owner, a day later an owner asks the supplier
FLOOR_QUOTE = m("f1", 0, "Quote for the floor: 48 m2 engineered oak, £3,950 fitted", "User_3")
FLOOR_THANKS = m("f2", 30, "Thanks Steve, that's within budget", "User_1")
FLOOR_LATE = m("f3", 60 * 24, "Hi Maria, the oak is back-ordered, delivery is now Thu 1 Oct", "User_4")
FLOOR_FIT = m("f4", 60 * 24 + 10, "If it's late I'll fit the week after", "User_3")
FLOOR_ASK = m("f5", 60 * 48, "Jess, anything similar in stock?", "User_2")
FLOOR_ANSWER = m("f6", 60 * 48 + 30, "The smoked oak is in stock, same price", "User_4")
FLOOR = [FLOOR_QUOTE, FLOOR_THANKS, FLOOR_LATE, FLOOR_FIT, FLOOR_ASK, FLOOR_ANSWER]


def test_a_first_name_maps_to_the_author_it_stands_for_from_who_answers_and_who_is_thanked():
    # Steve: thanked right after User_3's quote; Jess: asked, and User_4 answers next. Maria is only greeted (by
    # User_4, who is therefore not Maria): no author for her
    assert first_names(Scope("c", "t", FLOOR), FLOOR) == {"steve": "User_3", "jess": "User_4"}
    # a capitalised word also written in lower case is no name ("Great, go ahead" ... "great news")
    chat = [m("g1", 0, "Quote attached", "User_3"), m("g2", 5, "Great, go ahead", "User_1"),
            m("g3", 9, "on it", "User_3"), m("g4", 20, "great news all round", "User_2")]
    assert first_names(Scope("c", "t", chat), chat) == {}


def test_a_question_to_a_first_name_expands_that_authors_latest_message_in_a_chat_without_reply_links():
    choice = state_choice(FLOOR_ASK, FLOOR)
    # User_4's latest message, not the latest turn (User_3's, a day and a half earlier: no turn just before)
    assert (choice.parent_id, choice.relation) == ("f3", EXPAND) and "first name" in choice.reason
    assert choice.confidence >= 0.5  # an addressee's reading: the default takes it where its fitted layer roots
    # a decision addressed to someone opens a subject of its own: no question, no thanks, no such reading
    told = m("f5", 60 * 48, "Jess, for the stairs we want the charcoal runner", "User_2")
    assert "first name" not in state_choice(told, [*FLOOR[:4], told, FLOOR_ANSWER]).reason
    # another speaker's turn just before it: the child takes that turn up, naming whom it asks about it
    soon = m("f5", 60 * 24 + 40, "Jess, anything similar in stock?", "User_2")
    choice = state_choice(soon, [*FLOOR[:4], soon, FLOOR_ANSWER])
    assert choice.parent_id == "f4" and "turn just before" in choice.reason
    # where replies are marked, a missing link says what it says: no such reading
    linked = [*FLOOR[:4], FLOOR_ASK, m("f6", 60 * 48 + 30, "The smoked oak is in stock", "User_4", reply_to="f5")]
    assert "first name" not in state_choice(FLOOR_ASK, linked).reason
    # the default takes it where its fitted layer roots the question
    default = RevisionFirstRelation.from_config(StructuringConfig())
    [choice] = default.label_pairs(Q, FLOOR_ASK, FLOOR[:4], Scope("c", "t", FLOOR)).choices
    assert (choice.parent_id, choice.relation) == ("f3", EXPAND) and "state layer" in choice.reason


def test_a_progress_report_takes_the_speakers_latest_report_where_the_revision_layer_takes_another_statement():
    # a job chat without reply links (hand-written): the finish date, a status report, then the date slips. The
    # revision layer reads "slips to" with a new date for the slot of the first message (the only one with a
    # date); the report it replaces is the contractor's latest, the state the chain is at
    finish = m("b1", 0, "Bathroom tiling: finish on Fri 3 July", "User_3")
    fine = m("b2", 40, "Great, go ahead", "User_1")
    status = m("b3", 60 * 24 * 20, "Status: boarding done, tiles arrived 👌 on track", "User_3")
    slips = m("b4", 60 * 24 * 24, "Bad news, the grout came in the wrong colour batch. Bathroom tiling finish "
                                  "slips to Tue 7 July", "User_3")
    chat = [finish, fine, status, slips]
    default = RevisionFirstRelation.from_config(StructuringConfig())
    [choice] = default.label_pairs(Q, slips, chat[:3], Scope("c", "t", chat)).choices
    assert (choice.parent_id, choice.relation) == ("b3", UPDATE) and "not the revision layer's b1" in choice.reason
    # where the layer takes the speaker's latest report itself, it decides, as before
    [choice] = default.label_pairs(Q, slips, [finish, fine], Scope("c", "t", [finish, fine, slips])).choices
    assert (choice.parent_id, choice.relation) == ("b1", UPDATE) and "revision layer" in choice.reason
