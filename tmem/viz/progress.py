"""Words and tables for work in progress: a background batch run (tmem.evaluation.batch.jobs.Progress) on the pages
whose data it fills, a sweep being measured (tmem.evaluation.sweep.SweepProgress) on the Sweep page, and the first
screen of a question whose pipeline is still running (the BM25 seed stage is ready in a fraction of a second;
discovery, structuring and the answer follow)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from tmem.types import Anchor, Gold, Message


def clock(seconds: float | None) -> str:
    """12 s, 3 min 05 s, 1 h 02 min; '—' when unknown."""
    if seconds is None or seconds != seconds:
        return "—"
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s // 60 % 60:02d} min"


def eta(elapsed_s: float, fraction: float) -> float | None:
    """Seconds to go at the rate so far (None before there is a rate)."""
    return elapsed_s * (1 - fraction) / fraction if 0 < fraction < 1 else None


def eta_suffix(elapsed_s: float, fraction: float) -> str:
    """' — 3 s so far, about 5 s to go'; no guess before a second has passed and a tenth of the work is done (the
    first stages are quick, so an early rate would promise far too little); at the end, that the result is being
    stored (the last stage reports 100 % before the trace is written and the page redraws)."""
    if fraction >= 1:
        return f" — {clock(elapsed_s)} so far, storing the result…"
    left = eta(elapsed_s, fraction) if elapsed_s >= 1 and fraction >= 0.1 else None
    return f" — {clock(elapsed_s)} so far" + (f", about {clock(left)} to go" if left is not None else
                                               ", estimating the time left…")


def progress_line(label: str, progress) -> str:
    """One line for a batch run: what runs, how far, how long so far and to go."""
    head = f"Batch {label}: "
    if progress.state == "running":
        to_go = f", about {clock(progress.eta_s)} to go" if progress.eta_s is not None else ""
        return (f"{head}{progress.message} — {progress.done}/{progress.total} question-stages "
                f"({progress.fraction:.0%}), {clock(progress.elapsed_s)} so far{to_go}"
                + (f"; {progress.spend}" if getattr(progress, "spend", "") else ""))  # tokens and cost so far
    return f"{head}{progress.message} in {clock(progress.elapsed_s)}"


def sweep_line(progress) -> str:
    """One line for a sweep another process is measuring: how far, how long so far and to go."""
    left = eta(progress.elapsed_s, progress.fraction) if progress.fraction >= 0.1 else None
    return (f"Sweep {progress.sweep}: running — {progress.measured}/{progress.total} (cell, question) pairs "
            f"measured ({progress.fraction:.0%}), {clock(progress.elapsed_s)} so far"
            + (f", about {clock(left)} to go" if left is not None else "")
            + "; its cells fill in as they are measured, and the page redraws when it ends")


def seed_units(anchors: Sequence[Anchor], gold: Gold | None) -> tuple[int, int]:
    """(gold evidence units with a message among the anchors, all units) — the funnel's first step."""
    if gold is None or not gold.evidence:
        return 0, 0
    ids = {a.message_id for a in anchors}
    return sum(any(m in ids for m in unit) for unit in gold.evidence), len(gold.evidence)


def seed_table(anchors: Sequence[Anchor], messages: Mapping[str, Message], gold: Gold | None,
               top: int = 8, width: int = 110) -> pd.DataFrame:
    """The top BM25 anchors, gold evidence marked, text shortened: what the first screen shows while discovery
    runs (a small static table: it draws at once, before the interactive grid's script has loaded)."""
    golds = set(gold.evidence_ids) if gold else set()
    rows = []
    for a in sorted(anchors, key=lambda a: a.rank)[:top]:
        m = messages.get(a.message_id)
        text = (m.text if len(m.text) <= width else m.text[:width - 1] + "…") if m else "—"
        rows.append({"rank": a.rank, "BM25": f"{a.score:.2f}", "gold": "✓" if a.message_id in golds else "",
                     "time": f"{m.timestamp:%Y-%m-%d %H:%M}" if m else "—", "author": (m.author if m else None) or "—",
                     "text": text})
    return pd.DataFrame(rows, columns=["rank", "BM25", "gold", "time", "author", "text"]).set_index("rank")
