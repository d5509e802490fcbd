"""Re-readings of the fitted layer's decision in the default relation role (revision_first.py), each an UPDATE
where both sides state a state (`both_state`, Sec. 4.3): a top-level change the fitted model rooted changes the
speaker's own latest post (`restates_post`) or the top-level post it is about (`revises_post`), and a speaker's
state following their own report replaces the report (`follows_up_own`). Dev figures in docs/evaluation.md, "Tenth
pass: revisions built as EXPAND or ROOT" (`restates_post`: "Fifth pass")."""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from tmem.models.relation.features import STATE_MARGIN
from tmem.models.relation.revision import (
    CHANGED_ARROW,
    MIN_OWN_RELEVANCE,
    REVISION,
    STATUS,
    Revision,
    Thresholds,
    own_text,
    revision_cue,
    states_slot,
    status_of,
)
from tmem.models.relation.values import NEGATED_VALUE, cues
from tmem.types import EXPAND, Message, RelationChoice

POST_RELEVANCE = 0.3  # `revises_post`'s floor, on the fifteen typed dev corpora (right UPDATEs / gold ROOTs lost):
# 0.2 5/3, 0.25 5/1 ("design review moved to Friday" after "Friday drinks on the terrace at 5", 0.26), 0.3 4/0,
# 0.35 3/0
FOLLOW_UP_RELEVANCE = 0.6  # a follow-up that does not reply to the report: as close to it as a reply would be


def both_state(parent: str, child: str) -> bool:
    """Both messages state a state (Sec. 4.3: an UPDATE changes one), read alike on both sides: some sentence sets a
    state in a message that asks nothing (the fitted role's reading), or a slot (`states_slot`, this layer's);
    "Opened 8 tickets for it" reports an action and states none."""
    read = [cues(parent), cues(child)]
    return all(c.states and not c.challenge for c in read) or (states_slot(parent) and states_slot(child))


def revises_post(child: Message, candidates: Sequence[Message], relevance: Sequence[float]) -> Revision | None:
    """A top-level message with explicit change wording (not a bare status word, which reports progress) that the
    fitted model rooted and `restates_post` did not read, because the post is another speaker's ("actually L gloves 6
    is too many, 4" after the monthly order list; "bad news ... table 3 is not final anymore" after "table 3 is
    final: ours 84.2 ..."): in a chat that marks replies, a top-level change changes a top-level post, the one it is
    about. The parent is the latest top-level post within STATE_MARGIN of the most relevant one, at relevance >=
    POST_RELEVANCE, where both state a state (`both_state`, Sec. 4.3: an UPDATE changes one). Dev, the fifteen typed
    corpora: 4 right UPDATEs of four styles, 2 UPDATEs of a wrong parent for gold UPDATEs left ROOT before."""
    cue = revision_cue(child.text)
    if cue is None or child.reply_to is not None or not (REVISION.search(cue) or NEGATED_VALUE.search(cue)
                                                         or CHANGED_ARROW.search(cue)):
        return None
    posts = [i for i, p in enumerate(candidates) if p.reply_to is None and relevance[i] >= POST_RELEVANCE
             and both_state(p.text, child.text)]  # an UPDATE changes a state (Sec. 4.3): both sides state one
    if not posts:
        return None
    best = max(relevance[i] for i in posts)
    i = max(i for i in posts if relevance[i] >= best - STATE_MARGIN)
    return Revision(candidates[i], f"a top-level revision ('{cue}') the fitted model rooted: UPDATE of the top-level "
                                   f"post it is about, {candidates[i].id} (relevance {relevance[i]:.2f})",
                    (candidates[i].id,))


def follows_up_own(child: Message, candidates: Sequence[Message], choice: RelationChoice,
                   relevance: Callable[[], Sequence[float]], floor: float = MIN_OWN_RELEVANCE) -> Revision | None:
    """A fitted EXPAND of the speaker's own earlier message that states a state but no slot the layer reads (a count
    or result reported with its cause: "final final for drop 1: 16, one pallet failed the wrap check"), by a message
    that states a slot and asks nothing ("scratch that, we rewrapped it, 17 goes"): the speaker's new word on what
    they reported replaces it, an UPDATE. Both sides state a state (`both_state`, Sec. 4.3: an UPDATE changes one;
    "uhaul just texted, they double booked, no van" states none, so "got one from enterprise!!" stays an EXPAND of
    it). The follow-up is about the report: it replies to it at the layer's floor for a speaker's own statement
    (`floor`, MIN_OWN_RELEVANCE: an unrelated announcement in reply to "notes are in the doc, nothing new" says
    nothing about it), or is as close to it as a reply (relevance >= FOLLOW_UP_RELEVANCE: "Celtic have paid the
    £60" after "Celtic still owe £60 ref fees"). Dev, the fifteen typed corpora: 3 right-parent gold UPDATEs of
    three styles, nothing else changed."""
    parent = next((p for p in candidates if p.id == choice.parent_id), None)
    if choice.relation != EXPAND or parent is None or parent.author != child.author or states_slot(parent.text):
        return None
    if "?" in own_text(child.text) or not states_slot(child.text) or not both_state(parent.text, child.text):
        return None
    if relevance()[candidates.index(parent)] < (floor if child.reply_to == parent.id else FOLLOW_UP_RELEVANCE):
        return None
    return Revision(parent, f"the speaker's own report {parent.id}, which states no slot, followed by one: "
                            f"UPDATE of {parent.id}", (parent.id,))


# The top-level post reading (a stand-up or status update changing its speaker's earlier status): revision-first
# tries it before `revises_post`
def restates_post(child: Message, candidates: Sequence[Message], relevance: Sequence[float],
                  t: Thresholds | None = None) -> Revision | None:
    """A top-level post with revision wording, in a chat that marks replies, which the fitted model rooted: a
    stand-up or status update changing its speaker's earlier status ("export ETA slips to fri"). The parent is the
    speaker's latest earlier top-level post where both state a state (`both_state`), at relevance >=
    `min_post_relevance` (a speaker's posts form their status chain), when it is also the most relevant of them
    (where they differ, which post the child revises is not plain: cases dev one wrong parent less, standup dev
    one right parent less); or, when the child reopens or changes a status, a later message stating another
    status of it (`status_tip`: the ticket's "Resolved" that a customer's "reopening this" replaces)."""
    t = t or Thresholds()
    cue = revision_cue(child.text)  # change wording: a status word alone reports progress ("redirects blocked"),
    # a revision only against another status of the same thing (`slot_reason`), which a post need not state
    if cue is None or child.reply_to is not None or not (REVISION.search(cue) or NEGATED_VALUE.search(cue)
                                                         or CHANGED_ARROW.search(cue)):
        return None
    own = [i for i, p in enumerate(candidates) if p.author == child.author and p.reply_to is None
           and relevance[i] >= t.min_post_relevance and both_state(p.text, child.text)]
    if own and max(own, key=lambda i: (relevance[i], i)) == own[-1]:  # the latest is also the most like it
        post = own[-1]
        tip = status_tip(child, candidates, relevance, post, t.min_own_relevance)
        i, why = (tip, f"a later status of it ({', '.join(sorted(status_of(candidates[tip].text)))})") \
            if tip is not None else (post, "the speaker's latest top-level post")
        return Revision(candidates[i], f"a top-level revision ('{cue}') the fitted model rooted: UPDATE of {why}, "
                                       f"{candidates[i].id} (relevance {relevance[i]:.2f})", (candidates[post].id,))
    return None


def status_tip(child: Message, candidates: Sequence[Message], relevance: Sequence[float], post: int,
               floor: float) -> int | None:
    """When the child states a status, the latest later message (after `post`) stating another status at
    relevance >= floor, skipping a message that repeats the status before it ("stays resolved" backs "Resolved"):
    the state a reopening replaces. None when the child states no status or nothing later states one."""
    now, tip = status_of(child.text), None
    if not now:
        return None
    for j in range(post + 1, len(candidates)):
        said = status_of(candidates[j].text)
        if said - now and relevance[j] >= floor and (tip is None or said != status_of(candidates[tip].text)):
            tip = j
    return tip


# A fix reported: not any finished work ("Finished the design review"), which ends no problem
FIXED = re.compile(r"\b(fixed|resolved)\b", re.IGNORECASE)
# A report that something does not work: the state a later "fixed" replaces ("bug: map doesn't render", "the export
# is broken again", "the upload fails with a 500")
PROBLEM = re.compile(r"\b(bugs?|broken|errors?|crash(es|ed|ing)?|fail(s|ed|ing|ure)?|"
                     r"(does|is|are|do)(n['’]?t| not) (work|render|load|start|run|build)\w*|not working|blank)\b",
                     re.IGNORECASE)
_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
_FUNCTION_WORDS = frozenset("the and for now but not this that with its it's from our any all was are is has have "
                            "again same just still".split())


def fixes_problem(child: Message, candidates: Sequence[Message]) -> Revision | None:
    """A top-level report that a thing is fixed ("map fixed, reading waypoints now ✅", "resolved") whose subject
    an earlier message reported broken ("bug: map doesn't render any stops"): the fix changes that problem's
    status, an UPDATE of the latest such report that names a word of the fix, whoever wrote it. A status word
    alone says nothing about which state it ends: the problem report names it."""
    own = own_text(child.text)
    if not FIXED.search(own) or "?" in own:
        return None
    words = set(_WORD.findall(own.casefold())) - _FUNCTION_WORDS - set(STATUS.findall(own.casefold()))
    for parent in reversed(candidates):
        said = own_text(parent.text)
        if PROBLEM.search(said) and "done" not in status_of(said) and words & set(_WORD.findall(said.casefold())):
            shared = ", ".join(sorted(words & set(_WORD.findall(said.casefold()))))
            return Revision(parent, f"reports fixed what {parent.id} reported broken (names '{shared}'): UPDATE "
                                    f"of that report", (parent.id,))
    return None
