"""Stale answers and revisions without rollback (tmem.analysis.stale) on hand-built traces of the golden
conversation: the launch moved from March 3 (m01) to March 17 (m04)."""
from tmem.analysis import stale
from tmem.demo.golden import MESSAGES, QUESTION
from tmem.types import Answer, Edge, ForestNode, Gold, Span, StageTrace, Trace, Usage, Verdict

TEXT = {m.id: m for m in MESSAGES}
TIMES = {m.id: m.timestamp for m in MESSAGES}
GOLD = Gold("q1", "March 17 instead of March 3", (("m04",),), superseded="March 3")
CHAIN = Gold("q1", "March 17", (("m01", "m02"), ("m04",)), superseded="March 3")


def trace(answer: str, correct: bool, evidence=("m01", "m04"), edges=(), offline=True, omitted=()) -> Trace:
    nodes = tuple(ForestNode(i + 1, 0, "ROOT", 0, i + 1, mid, TEXT[mid].timestamp, TEXT[mid].author,
                             TEXT[mid].text) for i, mid in enumerate(evidence))
    stages = (StageTrace("structuring", 0.0, {}, Usage(), "offline", True),)
    spans = tuple(Span(mid, 0, TEXT[mid].text, 5, 0.0, 0.0, None, False) for mid in omitted)
    return Trace(QUESTION, "full", "h", "golden", evidence_ids=tuple(evidence), nodes=nodes, edges=tuple(edges),
                 spans=spans, stages=stages,
                 answers=(Answer("forest", answer, "offline:x" if offline else "llm:m", offline, "p", 10),),
                 verdicts=(Verdict("forest", correct, "", "offline:lexical-judge", True),))


def test_an_answer_that_states_the_superseded_state_is_stale():
    found = stale.stale_answer(trace("The product launch is on March 3.", False), GOLD)
    assert found and found.category == stale.STALE and found.source == "gold superseded"
    assert "'March 3'" in found.detail and "offline stand-in" in found.detail
    llm = stale.stale_answer(trace("The product launch is on March 3.", False, offline=False), GOLD)
    assert "offline stand-in" not in llm.detail


def test_contrast_the_current_state_or_a_correct_answer_is_not_stale():
    assert stale.stale_answer(trace("Moved to March 17 instead of March 3.", False), GOLD) is None
    assert stale.stale_answer(trace("It is not March 3 any more.", False), GOLD) is None  # negated
    assert stale.stale_answer(trace("March 3, then March 17.", False), GOLD) is None  # says the new state too
    assert stale.stale_answer(trace("March 3", True), GOLD) is None  # the judge said correct
    assert stale.stale_answer(trace("The newsletter is on Friday.", False), GOLD) is None


def test_an_answer_restating_the_replaced_side_of_a_forest_update_is_stale():
    edge = Edge("m01", "m04", "UPDATE", 0.9)
    no_superseded = Gold("q1", "March 17", (("m04",),))
    restated = "The product launch is scheduled for March 3 with a soft launch to beta users first."
    found = stale.stale_answer(trace(restated, False, edges=[edge]), no_superseded)
    assert found and found.source == "forest UPDATE" and found.messages == ("m01", "m04")
    # the rule, the edge, the slot (m04 brings the date 17 for m01's 3) and the reference are named
    assert found.rule == stale.FOREST_RULE and found.detail.startswith("forest rule: ")
    assert "m01 -> m04 (confidence 0.90)" in found.detail and "its date 3, replaced by 17" in found.detail
    assert found.reference == "reference: full variant's forest (this trace)"
    # two topic words in common are not a restatement of m01
    assert stale.stale_answer(trace("The product team is happy.", False, edges=[edge]), no_superseded) is None
    # an EXPAND edge does not replace anything
    expand = Edge("m01", "m04", "EXPAND", 0.9)
    assert stale.stale_answer(trace(restated, False, edges=[expand]), no_superseded) is None


def test_revision_without_rollback_by_gold_evidence_order():
    held_old_only = trace("x", False, evidence=("m01", "m09"))
    found = stale.revision_without_rollback(held_old_only, CHAIN, TIMES)
    assert found and found.category == stale.ROLLBACK_MISSED and found.messages == ("m01", "m04")
    assert found.source == "gold evidence order"
    assert stale.revision_without_rollback(trace("x", False, evidence=("m01", "m04")), CHAIN, TIMES) is None
    assert stale.revision_without_rollback(trace("x", False, evidence=("m04",)), CHAIN, TIMES) is None
    # compression omitted the rollback's text: the answer context holds only the earlier state
    cut = trace("x", False, evidence=("m01", "m04"), omitted=("m04",))
    assert stale.revision_without_rollback(cut, CHAIN, TIMES) is not None


def test_revision_without_rollback_needs_a_state_change():
    two_facts = Gold("q1", "March 17", (("m01",), ("m04",)))  # no superseded state, no gold edges
    assert stale.revision_without_rollback(trace("x", False, evidence=("m01",)), two_facts, TIMES) is None


def test_gold_update_edges_decide_which_state_replaces_which():
    # gold edges: m01 -UPDATE-> m04 -EXPAND-> m05; the later EXPAND m05 is not a rollback of m04
    edges = [("m04", "m01", "UPDATE"), ("m05", "m04", "EXPAND"), ("m01", None, "ROOT")]
    gold = Gold("q1", "March 17", (("m01",), ("m04",), ("m05",)))
    holds_current = trace("x", False, evidence=("m04",))
    assert stale.revision_without_rollback(holds_current, gold, TIMES, edges) is None
    old_only = stale.revision_without_rollback(trace("x", False, evidence=("m01", "m05")), gold, TIMES, edges)
    assert old_only and old_only.source == "gold UPDATE edges" and old_only.messages == ("m01", "m04")


def test_findings_lists_both_categories():
    both = stale.findings(trace("The product launch is on March 3.", False, evidence=("m01",)), CHAIN, TIMES)
    assert [f.category for f in both] == [stale.STALE, stale.ROLLBACK_MISSED]
    assert all(c in stale.EXPLAIN for c in stale.CATEGORIES)


# ------------------------------------------------------------------------ linear and bounded (issue 44, row 1)
def _reference(trace_, gold, times, gold_edges=()):
    """The check as it was before it was made linear (a set of later units per unit): the oracle the linear one
    must agree with on every small case."""
    if gold is None or len(gold.evidence) < 2:
        return None
    present = stale.stage_sets(trace_)["after_compression"]
    units = [set(u) for u in gold.evidence]
    children = {}
    for child, parent, relation in gold_edges:
        if parent and relation == "UPDATE":
            children.setdefault(parent, set()).add(child)

    def descendants(start):
        seen, todo = set(), list(start)
        while todo:
            for c in children.get(todo.pop(), ()):
                if c not in seen:
                    seen.add(c)
                    todo.append(c)
        return seen

    by_edges = [{j for j, other in enumerate(units) if j != i and other & descendants(unit)}
                for i, unit in enumerate(units)] if children else []
    start = lambda u: min(times[i] for i in u if i in times)  # noqa: E731
    if any(by_edges):
        later, used = by_edges, True
    elif not gold.superseded or any(not any(i in times for i in u) for u in units):
        later, used = [set() for _ in units], False
    else:
        order = sorted(range(len(units)), key=lambda i: start(gold.evidence[i]))
        later, used = [set(order[order.index(i) + 1:]) for i in range(len(units))], False
    for i, unit in enumerate(gold.evidence):
        if not set(unit) & present or not later[i]:
            continue
        if not any(set(gold.evidence[j]) & present for j in later[i]):
            held = sorted(set(unit) & present)[0]
            nxt = sorted(gold.evidence[min(later[i], key=lambda j: start(gold.evidence[j]))])[0]
            return held, nxt, "gold UPDATE edges" if used else "gold evidence order"
    return None


def test_the_linear_check_flags_exactly_what_the_quadratic_one_did():
    import random
    from datetime import datetime, timedelta

    rng = random.Random(44)
    ids = [f"x{i}" for i in range(12)]
    times = {m: datetime(2025, 1, 1) + timedelta(minutes=7 * i) for i, m in enumerate(rng.sample(ids, len(ids)))}
    flagged = 0
    for _ in range(3000):
        units = tuple(tuple(rng.sample(ids, rng.randint(1, 2))) for _ in range(rng.randint(2, 6)))
        gold = Gold("q1", "a", units, superseded=rng.choice([None, "old"]))
        edges = [(rng.choice(ids), rng.choice(ids + [None]), rng.choice(["UPDATE", "EXPAND"]))
                 for _ in range(rng.randint(0, 8))]
        kept = tuple(rng.sample(ids, rng.randint(0, 6)))
        t = Trace(QUESTION, "full", "h", "x", evidence_ids=kept,
                  stages=(StageTrace("seed_retrieval", 0.0, {}, Usage(), "offline", True),))
        want = _reference(t, gold, times, edges)
        got = stale.revision_without_rollback(t, gold, times, edges)
        assert (got.messages + (got.source,) if got else None) == want, (units, gold.superseded, edges, kept)
        flagged += want is not None
    assert flagged > 100  # the cases exercise the finding, not only its absence


def _many_units(n: int):
    from datetime import datetime, timedelta

    units = tuple((f"u{i}",) for i in range(n))
    times = {f"u{i}": datetime(2025, 1, 1) + timedelta(minutes=i) for i in range(n)}
    held = tuple(f"u{i}" for i in range(0, n, 2)) + (f"u{n - 1}",)  # the current state held: no finding
    t = Trace(QUESTION, "full", "h", "x", evidence_ids=held,
              stages=(StageTrace("seed_retrieval", 0.0, {}, Usage(), "offline", True),))
    return t, Gold("q1", "a", units, superseded="old"), times


def test_the_check_takes_memory_linear_in_the_gold_units():
    """1,000 one-message units ordered by time: the quadratic check kept a set of later units per unit (500,000
    entries here, 742 MB for 5,000 units); the linear one keeps a few lists."""
    import tracemalloc

    t, gold, times = _many_units(1_000)
    tracemalloc.start()
    found = stale.revision_without_rollback(t, gold, times)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert found is None
    assert peak < 2 * 1024 ** 2, f"{peak:,} bytes for {len(gold.evidence):,} units"


def test_the_check_is_bounded_past_the_importers_unit_limit_and_on_long_edge_walks(monkeypatch):
    t, gold, times = _many_units(stale.MAX_GOLD_UNITS + 1)
    assert stale.revision_without_rollback(t, gold, times) is None  # not checked: no question has that many
    # 39 units whose UPDATE edges lead into one long tail reaching no other unit, then an UPDATE b -> c: walked
    # from each unit in turn, the edges take more steps than the bound before b's is found; given up
    from datetime import datetime

    tail = [(f"t{i + 1}", f"t{i}", "UPDATE") for i in range(50_000)]
    edges = tail + [("t0", f"a{i}", "UPDATE") for i in range(39)] + [("c", "b", "UPDATE")]
    units = tuple((f"a{i}",) for i in range(39)) + (("b",), ("c",))
    times = {u[0]: datetime(2025, 1, 1) for u in units}
    t = Trace(QUESTION, "full", "h", "x", evidence_ids=("b",),
              stages=(StageTrace("seed_retrieval", 0.0, {}, Usage(), "offline", True),))
    assert stale.revision_without_rollback(t, Gold("q1", "a", units), times, edges) is None
    monkeypatch.setattr(stale, "MAX_EDGE_STEPS", 10 ** 8)
    unbounded = stale.revision_without_rollback(t, Gold("q1", "a", units), times, edges)
    assert unbounded is not None and unbounded.messages == ("b", "c")  # what the bound gave up


# ------------------------------------------------------- stale answers that are real (issue 39, item 3)
def nodes_trace(texts: dict[str, str], answer: str, edges=(), variant="full", correct=False) -> Trace:
    """A trace whose forest holds `texts` (id -> text), with these edges and a wrong answer."""
    nodes = tuple(ForestNode(i + 1, 0, "ROOT", 0, i + 1, mid, TIMES["m01"], "User_1", text)
                  for i, (mid, text) in enumerate(texts.items()))
    return Trace(QUESTION, variant, "h", "golden", evidence_ids=tuple(texts), nodes=nodes, edges=tuple(edges),
                 stages=(StageTrace("structuring", 0.0, {}, Usage(), "offline", True),),
                 answers=(Answer("forest", answer, "offline:x", True, "p", 10),),
                 verdicts=(Verdict("forest", correct, "", "offline:lexical-judge", True),))


NO_CHAIN = Gold("q1", "March 17", (("m04",),))  # no superseded state, no gold edges: the forest is the reference
LAUNCH = {"m01": TEXT["m01"].text, "m04": TEXT["m04"].text}
RESTATED = "The product launch is scheduled for March 3 with a soft launch to beta users first."


def test_an_update_between_two_slots_does_not_count():
    """The demo's false finding in hand-built words: a count replaced by an unrelated remark. Before issue 39 the
    answer that restates the count (with another count) was flagged stale on that edge."""
    texts = {"p": "Billing service: 12 open bugs this week.",
             "c": "The README for the exporter needs a new screenshot, I'll update it."}
    edge = Edge("p", "c", "UPDATE", 0.9)
    assert stale.slot_changes(texts["p"], texts["c"]) == ()  # a count against a name: not one slot
    assert stale.stale_answer(nodes_trace(texts, "Billing service: 10 open bugs this week.", [edge]), NO_CHAIN) \
        is None
    ref = stale.reference_chain(NO_CHAIN, forest=nodes_trace(texts, "x", [edge]))
    assert ref.updates == () and ref.dropped == 1


def test_a_low_confidence_update_does_not_count():
    edge = Edge("m01", "m04", "UPDATE", stale.MIN_UPDATE_CONFIDENCE - 0.01)
    assert stale.stale_answer(nodes_trace(LAUNCH, RESTATED, [edge]), NO_CHAIN) is None
    sure = Edge("m01", "m04", "UPDATE", stale.MIN_UPDATE_CONFIDENCE)
    assert stale.stale_answer(nodes_trace(LAUNCH, RESTATED, [sure]), NO_CHAIN) is not None


def test_a_true_stale_answer_on_a_hand_built_chain_is_caught():
    """m01 (March 3) -UPDATE-> m04 (March 17 instead of March 3) -UPDATE-> r (March 24): an answer that restates
    m04 states a replaced state."""
    texts = {**LAUNCH, "r": "Update: the product launch now moves to March 24, legal needs another week."}
    edges = [Edge("m01", "m04", "UPDATE", 0.8), Edge("m04", "r", "UPDATE", 0.7)]
    assert [(s.kind, s.old, s.new) for s in stale.slot_changes(texts["m01"], texts["m04"])] == \
        [("date", ("3",), ("17",))]  # "instead of March 3" names the old value: not one m04 brings
    found = stale.stale_answer(nodes_trace(texts, "Heads up: moving go-live to March 17, legal review slipped.",
                                           edges), NO_CHAIN)
    assert found and found.messages == ("m04", "r") and "its date 17, replaced by 24" in found.detail
    # the current state, or the restated words without the replaced value, are not stale
    assert stale.stale_answer(nodes_trace(texts, "The product launch now moves to March 24.", edges), NO_CHAIN) \
        is None
    no_value = "The product launch has a soft launch to beta users first."
    assert stale.stale_answer(nodes_trace(texts, no_value, edges), NO_CHAIN) is None


def test_the_gold_chain_is_the_reference_where_the_gold_has_one():
    edge = Edge("m01", "m04", "UPDATE", 0.9)
    # a superseded state: the gold rule alone; the forest's edge is not read
    superseded = Gold("q1", "March 17", (("m04",),), superseded="the beta")
    ref = stale.reference_chain(superseded, forest=nodes_trace(LAUNCH, "x", [edge]))
    assert ref.label == stale.GOLD_CHAIN and ref.updates == ()
    assert stale.stale_answer(nodes_trace(LAUNCH, RESTATED, [edge]), superseded, reference=ref) is None
    # gold UPDATE edges between the gold units: the gold rule on them, with the texts given
    chain = Gold("q1", "March 17", (("m01",), ("m04",)))
    gold_edges = [("m04", "m01", "UPDATE")]
    ref = stale.reference_chain(chain, gold_edges, LAUNCH, forest=None)
    assert ref.label == stale.GOLD_CHAIN and [(u.parent_id, u.child_id, u.confidence) for u in ref.updates] == \
        [("m01", "m04", 1.0)]
    flat = nodes_trace({}, RESTATED, variant="flat")  # no forest of its own
    found = stale.stale_answer(flat, chain, reference=ref)
    assert found and found.rule == stale.GOLD_RULE and found.source == "gold UPDATE"
    assert "the gold UPDATE edge m01 -> m04" in found.detail and found.detail.endswith("reference: gold chain "
                                                                                        "(gold UPDATE edges)")


def test_every_variant_is_read_against_the_same_reference():
    """The full variant's forest holds the true edge m01 -> m04; no-structuring's own forest holds a false one."""
    from tmem.evaluation.review import GoldContext, review_counts, trace_review

    full = nodes_trace(LAUNCH, "March 17", [Edge("m01", "m04", "UPDATE", 0.9)], correct=True)
    flat = nodes_trace({}, RESTATED, variant="flat")
    wrong = {"p": "Billing service: 12 open bugs this week.", "c": "Billing moves to 15 open bugs after triage."}
    own = nodes_trace(wrong, "Billing service: 12 open bugs this week.", [Edge("p", "c", "UPDATE", 0.9)],
                      variant="no-structuring")
    assert stale.stale_answer(own, NO_CHAIN) is not None  # read against its own forest, it would be flagged

    class Store:  # what GoldContext reads: the full trace is stored, not given
        def scope_golds(self, corpus, scope):
            return {"q1": NO_CHAIN}

        def gold_edges(self, corpus, scope):
            return []

        def messages_by_ids(self, corpus, scope, ids):
            return [TEXT[i] for i in ids if i in TEXT]

        def trace_index(self, corpus):
            import pandas as pd
            return pd.DataFrame([{"scope": QUESTION.scope, "question_id": "q1", "variant": "full",
                                  "config_hash": "h", "backend": "offline", "created_at": 1}])

        def run_results(self, corpus, run_id):
            import pandas as pd
            return pd.DataFrame(columns=["scope", "question_id", "variant", "config_hash", "backend"])

        def load_trace(self, corpus, scope, question_id, variant, config_hash, backend):
            assert (variant, config_hash, backend) == ("full", "h", "offline")
            return full

    ctx = GoldContext(Store(), "golden")
    rows = [{"variant": t.variant, **ctx.review(t, QUESTION.scope, "q1")} for t in (full, flat, own)]
    assert [r["stale"] for r in rows] == [False, True, False]  # flat caught by full's edge; own's edge not read
    assert rows[1]["stale_rule"] == stale.FOREST_RULE
    assert rows[1]["stale_reference"] == "reference: full variant's forest (latest stored)"
    assert ctx.reference(QUESTION.scope, "q1") is ctx.reference(QUESTION.scope, "q1")
    import pandas as pd
    counts = review_counts(pd.DataFrame(rows))
    assert counts[stale.STALE] == 1 and counts["stale_rules"] == {stale.FOREST_RULE: 1}
    # the run's own full trace, when given, is the reference ("same run")
    ctx = GoldContext(Store(), "golden")
    ctx.use_forests([full, flat], "same run")
    assert ctx.reference(QUESTION.scope, "q1").origin == "same run"
    assert trace_review(flat, NO_CHAIN, {}, [], None, ctx.reference(QUESTION.scope, "q1"))["stale"]


def test_the_demo_false_findings_are_gone():
    """Issue 39: on the shipped demo, user_implicit_1 and user_implicit_7 were flagged "repeats Msg_258, replaced by
    Msg_355" -- an UPDATE edge the offline relation role built from a ticket count to a wiki remark. The rule stops
    such an edge counting (built or not: since relation version 672abe5776fc the default role makes Msg_355 an
    EXPAND of Msg_353; test_an_update_between_two_slots_does_not_count checks the rule on a hand-built edge)."""
    import pytest

    from tmem import api
    from tmem.demo import DEMO_JSONL

    if not DEMO_JSONL.exists():
        pytest.skip("no demo corpus in data/")
    store = api.open_store(":memory:")
    roles = api.build_roles({}, store)
    for qid in ("user_implicit_1", "user_implicit_7"):
        question, gold = api.stored_question(store, "demo", qid, "Technology")
        trace = api.run_and_store(store, "demo", question, "full", api.resolve_config("full"), roles, gold,
                                  save=False)
        assert not trace.verdicts[0].correct  # a wrong answer: only the rule keeps it from being flagged
        text = {n.message_id: n.text for n in trace.nodes}
        assert stale.slot_changes(text["Msg_258"], text["Msg_355"]) == ()
        updates = [(e.parent_id, e.child_id, e.confidence) for e in trace.edges if e.relation == "UPDATE"]
        counted, _ = stale.counted_updates(updates + [("Msg_258", "Msg_355", 0.9)], text)
        assert ("Msg_258", "Msg_355") not in {(u.parent_id, u.child_id) for u in counted}
        assert stale.stale_answer(trace, gold) is None, qid
    store.close()
