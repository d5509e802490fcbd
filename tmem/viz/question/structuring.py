"""View model of the Structuring page: per question, the gold edges of its evidence (expected) against the
structuring decisions its stored trace holds (built), the wrong ones flagged with their error class, and the confusion
of the corpus (a style) gold x built split by right and wrong parent. Pure functions over a score that the evaluation
layer computed (tmem.evaluation.links.score_trace and tmem.evaluation.diagnostics, called by the page: view models stay
below evaluation)."""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import pandas as pd

from tmem.types import Message, Trace
from tmem.viz.batch.results import role_pairs, roles_line
from tmem.viz.safe import shorten

if TYPE_CHECKING:  # the score type only; importing the evaluation layer at run time would invert the layers
    from tmem.evaluation.links import LinkScore

EDGE_COLUMNS = ["right", "miss", "child", "expected", "expected parent", "built", "built parent", "confidence",
                "reason", "child text"]
# the rates first, then the counts behind them, the scope and the roles: the six roles on one line are ~300
# characters and, fourth, pushed every score off the screen at 1100 px (issue 42); the three rates fit beside the
# question and variant there. The relation role, which built the edges, has its own short column.
SUMMARY_COLUMNS = ["question", "variant", "edge accuracy", "UPDATE recall", "UPDATE precision", "scored",
                   "edges right", "parents right", "scope", "relation role", "roles"]


def summary_row(trace: Trace, backend: str, score: LinkScore) -> dict:
    """One stored trace's scores as a person reads them: the rates to three places, "—" where a rate has no
    denominator (no scored child, no gold or built UPDATE), then the relation role and all roles on one line (not the
    stored "|"-joined label)."""
    d = score.as_dict()
    rate = lambda v: "—" if v is None else f"{v:.3f}"  # noqa: E731 - text: one type per column (Arrow)
    return {"question": trace.question.id, "scope": trace.question.scope, "variant": trace.variant,
            "scored": score.children, "edges right": score.edge_right,
            "edge accuracy": rate(d["edge_accuracy"]), "parents right": score.correct,
            "UPDATE recall": rate(d["update_recall"]), "UPDATE precision": rate(d["update_precision"]),
            "relation role": relation_role(backend), "roles": roles_line(backend)}


def relation_role(backend: str) -> str:
    """The relation role of a stored backend label, without its decoding settings (the whole label read as one
    line when it does not split into the roles)."""
    found = dict(role_pairs(backend) or ()).get("relation")
    return found.split(" [", 1)[0] if found is not None else roles_line(backend)


def trace_labels(keys: Sequence[tuple[str, str, str]]) -> dict[tuple[str, str, str], str]:
    """{(question, variant, backend): the label a person picks it by}: question · variant · relation role; the
    roles on one line too where two keys would read the same."""
    short = {k: f"{k[0]} · {k[1]} · relation: {relation_role(k[2])}" for k in keys}
    counts = pd.Series(list(short.values())).value_counts()
    return {k: label if counts[label] == 1 else f"{label} ({roles_line(k[2])})" for k, label in short.items()}


def summary_table(rows: Sequence[dict]) -> pd.DataFrame:
    return pd.DataFrame(list(rows), columns=SUMMARY_COLUMNS)


def edge_table(score: LinkScore, messages: Mapping[str, Message]) -> pd.DataFrame:
    """One row per scored child: expected vs built edge, the wrong ones first; the confidence as text to three
    places, like the rates of the summary (a Styler showed the float as "0.689000"). Message text is data: shown
    shortened as plain text in a dataframe cell (never rendered as Markdown or HTML)."""
    rows = []
    for r in score.rows:
        child = messages.get(r["child"])
        rows.append({"right": "✓" if r["right"] else "✗", "miss": r.get("miss") or "", "child": r["child"],
                     "expected": r["expected"],
                     "expected parent": ", ".join(r["expected_parent"] or []) or "—", "built": r["built"],
                     "built parent": r["built_parent"] or "—", "confidence": f"{float(r['confidence']):.3f}",
                     "reason": r["reason"], "child text": shorten(child.text if child else "", 140)})
    frame = pd.DataFrame(rows, columns=EDGE_COLUMNS)
    return frame.sort_values("right", key=lambda s: s.eq("✓"), kind="stable").reset_index(drop=True)


def confusion_table(matrix: Mapping[str, Mapping[str, int]]) -> pd.DataFrame:
    """The confusion matrix (tmem.evaluation.diagnostics.confusion.matrix) as a frame: one row per gold label, one
    column per built cell (ROOT, EXPAND / UPDATE with the right or a wrong parent)."""
    return pd.DataFrame([{"gold": gold, **cells} for gold, cells in matrix.items()])


def confusion_labels(columns: Sequence[str]) -> dict[str, tuple[str, str]]:
    """{column: (header, tooltip)} of the confusion table: "EXPAND right" for "EXPAND right parent" and so on, the
    whole name in the tooltip. The six whole names were ~40 px wider than the table's room at 1100 px: the last
    column ("UPDATE wrong parent") was cut (issue 42)."""
    out = {}
    for column in columns:
        built, _, side = column.partition(" ")
        if side.endswith(" parent"):
            out[column] = (f"{built} {side.removesuffix(' parent')}", f"Built {built} with the {side} (gold: the row)")
    return out


def miss_summary(misses: Mapping[str, int]) -> str:
    """One plain-text line of the miss classes and their counts, the frequent first."""
    ranked = sorted(misses.items(), key=lambda kv: -kv[1])
    return "Misses by class: " + (", ".join(f"{name} {n}" for name, n in ranked if n) or "none") + "."


def latest_rows(scored: Sequence[tuple[str, LinkScore]]) -> list[dict]:
    """The per-child rows of several questions' scores (scope, score), one per (scope, child): a child in the
    evidence of several questions counts once, with the first score's decision (the page passes the latest first)."""
    seen, out = set(), []
    for scope, score in scored:
        for row in score.rows:
            if (scope, row["child"]) not in seen:
                seen.add((scope, row["child"]))
                out.append({**row, "scope": scope})
    return out


def highlight_wrong(frame: pd.DataFrame):
    """A Styler that tints the wrong edges' rows."""
    return frame.style.apply(lambda row: ["background-color: #fde2e1" if row["right"] == "✗" else ""] * len(row),
                             axis=1)


NEAR_COLUMNS = ["child", "built", "parent", "runner-up", "margin", "reason", "child text"]
# the relation role's reasons name the runner-up option and its margin to the winner (tmem.models.relation.fitted)
_RUNNER = re.compile(r"(?:runner-up|best parent) (\S+) p=[\d.]+ \(margin (-?[\d.]+)\)")


def near_misses(trace: Trace, messages: Mapping[str, Message], n: int = 10) -> pd.DataFrame:
    """The `n` structuring decisions of a trace closest to going the other way: smallest margin between the chosen
    option and the runner-up, as the role's reason records them (decisions without a recorded margin are left
    out: an LLM role or the rule-based roles give none)."""
    rows = []
    for d in trace.decisions:
        found = _RUNNER.search(d.note or "")
        if not found:
            continue
        child = messages.get(d.child_id)
        rows.append({"child": d.child_id, "built": d.relation, "parent": d.parent_id or "—",
                     "runner-up": found.group(1), "margin": float(found.group(2)), "reason": d.note,
                     "child text": shorten(child.text if child else "", 140)})
    frame = pd.DataFrame(rows, columns=NEAR_COLUMNS)
    return frame.sort_values("margin", kind="stable").head(n).reset_index(drop=True)


# What the offline relation roles are worth, measured on the sealed held-out case studies (data/cases/test, its 171
# hand-annotated edges; docs/evaluation.md, `links`): said wherever their forest is shown, so that a stand-in's
# edges are not read as the paper's relation judgement (App. K). tests/test_viz_structuring.py checks the figures
# against the docs.
STAND_IN_QUALITY = {
    "offline:revision-first": ("about six in ten of its UPDATE edges are right and it finds about half of the true "
                               "ones (UPDATE precision 0.609, recall 0.509: the pooled row of 295 children in the "
                               "sealed look for this version; its fitted layer alone 0.520, 0.473)"),
    "offline:fitted-relation": ("about half of its UPDATE edges are right and it finds fewer than half of the true "
                                "ones (UPDATE precision 0.520, recall 0.473: the same pooled row of the sealed look "
                                "for this version)"),
}


def update_precision(role: str) -> str:
    """The UPDATE precision an offline relation role measured on the sealed case studies ("" when not measured)."""
    found = re.search(r"UPDATE precision ([\d.]+)", STAND_IN_QUALITY.get(role, ""))
    return f"{found.group(1)} (held-out cases)" if found else ""


def stand_in_note(trace: Trace) -> str | None:
    """Who built the forest's edges, when an offline stand-in did (None: a language model, or no forest): its name,
    what it is, and its measured quality on held-out cases. Plain text (no markup)."""
    stage = trace.stage("structuring")
    if stage is None or not stage.offline or not trace.nodes:
        return None
    name = stage.backend.split(";", 1)[0].strip()  # without the masking note
    quality = STAND_IN_QUALITY.get(name, "a baseline rule, weaker than the fitted role there")
    return (f"The edges were built by {name}, an offline stand-in for the paper's relation judgement (App. K), not "
            f"a language model. On held-out hand-annotated case studies {quality} (docs/evaluation.md): read UPDATE "
            "and EXPAND as approximate. The Structuring page scores a forest against gold edges where the corpus has "
            "them.")


def fallback_note(trace: Trace, shown: int = 5) -> str | None:
    """The children the relation role failed on (a timeout, an endpoint down): each became a root by the fallback,
    not by the model's judgement. Names the role, each child and why its call failed; None when none failed. Plain
    text (no markup)."""
    failed = [e for e in trace.errors if e.stage == "relation" and e.fallback not in ("", "ignored")]
    if not failed:
        return None
    asked = sum(1 for d in trace.decisions if d.candidate_ids)
    more = f" (and {len(failed) - shown} more)" if len(failed) > shown else ""
    return (f"The relation model failed on {len(failed)} of {asked} children, so the fallback made each a root: "
            "their missing edges are failures, not the model's judgement. "
            + " | ".join(f"{shorten(e.message, 400)} -> {e.fallback}" for e in failed[:shown]) + more)
