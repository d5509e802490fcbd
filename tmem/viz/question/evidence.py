"""What happened to each message in one stored trace: statuses, the recovered-evidence table, the messages of a
selected cluster band, the conversation around a message, and the evidence funnel (paper Sec. 4.2-4.3).

Inputs are a `Trace`, the scope's messages as a DataFrame (`Store.messages_frame`) and, when the benchmark has
it, the `Gold` record; outputs are DataFrames for tables. Pure functions: nothing is recomputed from the corpus.
"""
from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from tmem.analysis.funnel import FUNNEL_STAGES, NOT_PART, evidence_funnel, lacks, memory_system
from tmem.types import Gold, Trace
from tmem.viz.safe import esc

STATUS_ORDER = ("anchor", "recovered", "candidate", "gold", "compressed")
FUNNEL_LABELS = {"gold": "gold evidence units", "anchors": "BM25 anchors", "windows": "discovery windows",
                 "selected": "selected R'(q)", "forest": "forest nodes", "after_compression": "in the answer context"}


@dataclass(frozen=True)
class Statuses:
    """Message-id sets of one trace, for colouring and filtering."""

    anchors: frozenset[str]
    recovered: frozenset[str]
    candidates: frozenset[str]
    gold: frozenset[str]
    compressed: frozenset[str]

    def of(self, message_id: str) -> list[str]:
        """Every status of one message, in STATUS_ORDER."""
        sets = (self.anchors, self.recovered, self.candidates, self.gold, self.compressed)
        return [name for name, ids in zip(STATUS_ORDER, sets) if message_id in ids]


def statuses(trace: Trace, gold: Gold | None = None) -> Statuses:
    anchors = frozenset(a.message_id for a in trace.anchors)
    evidence = frozenset(trace.evidence_ids)
    in_windows = frozenset(c.message_id for w in trace.windows for c in w.candidates)
    return Statuses(anchors=anchors, recovered=evidence - anchors, candidates=in_windows - evidence,
                    gold=gold.evidence_ids if gold else frozenset(),
                    compressed=frozenset(s.message_id for s in trace.spans if not s.kept))


def _by_id(messages: pd.DataFrame) -> pd.DataFrame:
    return messages.set_index("id", drop=False)


def recovered_table(trace: Trace, messages: pd.DataFrame, gold: Gold | None = None,
                    include_rejected: bool = False) -> pd.DataFrame:
    """Evidence that was not among the BM25 anchors (optionally also rejected window candidates), with the window,
    the in-window similarity rank, the evidence-utility label and its reason; gold evidence first, then by time."""
    marks = statuses(trace, gold)
    wanted = marks.recovered | (marks.candidates if include_rejected else frozenset())
    selection = {s.message_id: s for s in trace.selections}
    ranks = {c.message_id: (w.window_id, w.cluster_id, c.rank, c.similarity)
             for w in trace.windows for c in w.candidates}
    by_id = _by_id(messages)
    rows = []
    for mid in sorted(wanted, key=lambda i: (i not in marks.gold, by_id.loc[i, "timestamp"] if i in by_id.index
                                             else pd.Timestamp.max, i)):
        window, cluster, rank, sim = ranks.get(mid, (None, None, None, None))
        sel = selection.get(mid)
        m = by_id.loc[mid] if mid in by_id.index else None
        rows.append({"message_id": mid, "timestamp": None if m is None else m["timestamp"],
                     "author": None if m is None else m["author"], "topic": None if m is None else m["topic"],
                     "channel": None if m is None else m["channel"], "window": window, "cluster": cluster,
                     "rank": rank, "similarity": None if sim is None else round(sim, 3),
                     "label": sel.label if sel else ("IRRELEVANT" if mid in marks.candidates else None),
                     "reason": sel.reason if sel else "", "selected": mid in marks.recovered, "gold": mid in marks.gold,
                     "text": None if m is None else m["text"]})
    return pd.DataFrame(rows, columns=["message_id", "gold", "selected", "label", "window", "cluster", "rank",
                                       "similarity", "reason", "timestamp", "author", "topic", "channel", "text"])


def annotate(frame: pd.DataFrame, trace: Trace, gold: Gold | None = None) -> pd.DataFrame:
    """The messages with a `status` column ("anchor, gold", ...) and the anchor's BM25 rank."""
    marks = statuses(trace, gold)
    rank = {a.message_id: a.rank for a in trace.anchors}
    out = frame.copy()
    out.insert(0, "status", [", ".join(marks.of(i)) for i in out["id"]])
    out.insert(1, "anchor_rank", [rank.get(i) for i in out["id"]])
    return out


def band_options(trace: Trace) -> dict[str, str]:
    """{band id: label} for every DBSCAN cluster, e.g. {"C1": "C1 · launch · ρ=1.00 · accepted"}."""
    return {f"C{c.cluster_id}": f"C{c.cluster_id} · {c.topic or '(no topic)'} · ρ={c.density:.2f} · "
            f"{'accepted' if c.accepted else 'below μ'}" for c in trace.clusters}


def band_messages(trace: Trace, messages: pd.DataFrame, band: str, gold: Gold | None = None) -> pd.DataFrame:
    """Messages inside one cluster band: its padded window when the cluster passed the density threshold, else
    the cluster's own span; same topic as the cluster (all topics when the cluster has none)."""
    cluster = next((c for c in trace.clusters if f"C{c.cluster_id}" == band), None)
    if cluster is None:
        return annotate(messages.iloc[0:0], trace, gold)
    window = next((w for w in trace.windows if w.cluster_id == cluster.cluster_id), None)
    start, end = (window.start, window.end) if window else (cluster.start, cluster.end)
    inside = messages[(messages["timestamp"] >= start) & (messages["timestamp"] <= end)]
    if cluster.topic is not None:
        inside = inside[inside["topic"] == cluster.topic]
    return annotate(inside, trace, gold)


def evidence_messages(trace: Trace, messages: pd.DataFrame, gold: Gold | None = None) -> pd.DataFrame:
    """Every message the trace touched (anchors, window candidates, gold), in time order."""
    marks = statuses(trace, gold)
    ids = marks.anchors | marks.recovered | marks.candidates | marks.gold
    return annotate(messages[messages["id"].isin(ids)], trace, gold)


def conversation_around(messages: pd.DataFrame, message_id: str, trace: Trace | None = None,
                        gold: Gold | None = None, before: int = 6, after: int = 6,
                        same_topic: bool = True) -> pd.DataFrame:
    """The messages just before and after one message (in time order), of its topic when `same_topic`."""
    ordered = messages.sort_values(["timestamp", "id"]).reset_index(drop=True)
    hit = ordered.index[ordered["id"] == message_id]
    if not len(hit):
        return ordered.iloc[0:0]
    focus = ordered.loc[hit[0]]
    if same_topic and focus["topic"] is not None and not pd.isna(focus["topic"]):
        ordered = ordered[ordered["topic"] == focus["topic"]].reset_index(drop=True)
    at = int(ordered.index[ordered["id"] == message_id][0])
    part = ordered.iloc[max(0, at - before): at + after + 1].copy()
    part.insert(0, "focus", part["id"] == message_id)
    return annotate(part, trace, gold) if trace is not None else part


def funnel_table(trace: Trace, gold: Gold) -> pd.DataFrame:
    """Gold evidence units surviving each stage (anchors -> windows -> selected -> forest -> in the answer context);
    `change` is against the previous stage (windows add what discovery recovered; later stages can only lose)."""
    counts = evidence_funnel(trace, gold)
    system = memory_system(trace)
    rows, previous = [], counts["gold"]
    for stage in FUNNEL_STAGES:
        if lacks(trace, stage):  # a memory system's missing stages are no count, and no loss
            rows.append({"stage": stage, "label": f"{FUNNEL_LABELS[stage]} ({NOT_PART})", "units": None,
                         "change": None})
            continue
        label = f"recalled by {system}" if system and stage == "anchors" else FUNNEL_LABELS[stage]
        rows.append({"stage": stage, "label": label, "units": counts[stage], "change": counts[stage] - previous})
        previous = counts[stage]
    return pd.DataFrame(rows)


def context_markup(context: str, trace: Trace, gold: Gold | None, texts: dict[str, str]) -> str:
    """The answer context as escaped HTML, each line that carries a gold message highlighted (`texts`: message id ->
    text). A forest line is gold by its node index ("[7] parent=..."), a flat line by the gold message's text."""
    gold_ids = gold.evidence_ids if gold else frozenset()
    by_index = {n.index: n.message_id for n in trace.nodes}
    wanted = [f'text="{" ".join(texts[i].split())[:60]}' for i in gold_ids if texts.get(i)]
    rows = []
    for line in (context or "").splitlines():
        head = line.strip().split(" ", 1)[0]
        index = int(head[1:-1]) if head.startswith("[") and head.endswith("]") and head[1:-1].isdigit() else None
        forest = "parent=" in line and index is not None
        hit = by_index.get(index) in gold_ids if forest else any(w in " ".join(line.split()) for w in wanted)
        rows.append(f'<mark style="background:#d3f9d8">{esc(line)}</mark>' if hit and gold_ids else esc(line))
    return ('<pre style="white-space:pre-wrap;font-size:0.8rem;line-height:1.35;margin:0">' + "\n".join(rows)
            + "</pre>")
