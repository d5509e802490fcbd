"""Lexical units shared by seed retrieval, compression (Eq. 6) and the offline roles."""
from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+", re.UNICODE)

STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but by
can could did do does doing down during each few for from further had has have having he her here hers herself him
himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other
our ours ourselves out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself yourselves s t d ll m re ve y also get got ok okay yeah yes oh hey hi just really
""".split())

# Function words that still carry meaning for seed retrieval: polarity and temporal order. A state change is often
# worded with nothing else ("no longer", "not before", "now", "after the review", "only", "again"), so BM25 keeps
# them; their IDF stays low where they are common.
BM25_KEPT_WORDS = frozenset("no nor not now then after before again once only until during".split())
BM25_STOPWORDS = STOPWORDS - BM25_KEPT_WORDS


def tokenize(text: str) -> list[str]:
    """Case-folded word tokens; the BM25 document and query representation."""
    return _TOKEN.findall(text.casefold())


def content_units(text: str) -> set[str]:
    """U(s): normalized lexical units of a text, without stopwords (Eq. 6)."""
    return {t for t in tokenize(text) if t not in STOPWORDS}

# Wording that marks a change of state: revision cues for the offline relation role, and the "state change"
# spans that compression protects along UPDATE edges (Sec. 4.3). No cue only our demo generator writes
# (tests/test_relation_generator_cues.py): "scratch that" went for that reason (issue 38).
STATE_CHANGE_CUES = re.compile(
    r"\b(instead|no longer|new plan|revert(ed|ing)?|roll(ed|ing)? ?back|rollback|chang(e|ed|ing) (it |this |that )?"
    r"to|switch(ed|ing)? (to|back)|mov(e|ed|ing) (it |this |that )?to|replac(e|ed|es|ing)|postpon(e|ed)|"
    r"push(ed)? (back|out)|scrap(ped)?|cancel(l?ed)?|updated?|revis(e|ed|ion)|actually|"
    r"correction|now (we|it|the)|going forward|from now on|overrid(e|es|den))\b", re.IGNORECASE)
