"""Recall against messages: the budget-matched table and the recall-vs-messages curve of a recall
file written by `python -m tmem recall --out data/recall/NAME.json` (tmem.evaluation.budget_recall). Pure functions
over the file's JSON; the page (pages/recall.py) only loads and renders."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go

RECALL_DIR = Path(__file__).resolve().parents[3] / "data" / "recall"
COLOURS = {"bm25": "#7f7f7f", "embedding": "#9467bd", "tmem": "#d62728", "global-control": "#1f77b4"}


def load(path: Path) -> dict:
    """A recall file; ValueError naming the file and what is missing when it is not one."""
    try:
        body = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path}: not a readable recall file ({exc})") from None
    if not isinstance(body, dict) or not isinstance(body.get("runs"), list) or not body["runs"]:
        raise ValueError(f"{path}: no 'runs' (write one with python -m tmem recall --out)")
    for i, run in enumerate(body["runs"]):
        if "budget" not in run:
            raise ValueError(f"{path}: runs[{i}] has no 'budget' (recall was run with --budgets off)")
    return body


def provenance(body: dict, path: Path) -> str:
    """Where a recall file's figures come from: when (as recorded, else the file's time), the code's commit when it
    was recorded, the corpus and each role's backend."""
    when = body.get("created_at") or datetime.fromtimestamp(Path(path).stat().st_mtime, UTC).strftime(
        "%Y-%m-%d %H:%M UTC (file time)")
    roles = "; ".join(f"{k}: {v}" for k, v in (body.get("roles") or {}).items()) or "roles not recorded"
    return (f"corpus {body.get('corpus', '?')} · written {when} · commit {body.get('commit') or 'not recorded'} · "
            f"{roles}")


def files(folder: Path | None = None) -> list[Path]:
    folder = folder or RECALL_DIR
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


def splits(run: dict) -> list[str]:
    return list(run["budget"]["splits"])


def matched_table(run: dict) -> pd.DataFrame:
    """Per split: each method at T-Mem's own message count, with recall@k of the plain variants beside it."""
    rows = []
    for split, part in run["budget"]["splits"].items():
        for name, r in part["matched"].items():
            rows.append({"split": split, "method": name, "recall": r["recall"], "mean messages": r["mean_messages"],
                         "questions": r["questions"], "units": r["units"]})
    return pd.DataFrame(rows, columns=["split", "method", "recall", "mean messages", "questions", "units"])


def curve_figure(run: dict, split: str) -> go.Figure:
    """Recall against mean messages per question, one line per method; T-Mem's unbudgeted point is marked."""
    part = run["budget"]["splits"][split]
    fig = go.Figure()
    for name, points in part["curve"].items():
        fig.add_trace(go.Scatter(
            x=[p["mean_messages"] for p in points], y=[p["recall"] for p in points], mode="lines+markers",
            name=name, line={"color": COLOURS.get(name)}, customdata=[p["budget"] for p in points],
            hovertemplate=f"{name}<br>budget %{{customdata}}<br>mean messages %{{x:.1f}}<br>recall %{{y:.3f}}"
                          "<extra></extra>"))
    own = part["matched"]["tmem"]
    fig.add_trace(go.Scatter(x=[own["mean_messages"]], y=[own["recall"]], mode="markers", name="tmem, R'(q)",
                             marker={"symbol": "star", "size": 14, "color": COLOURS["tmem"]},
                             hovertemplate="T-Mem R'(q)<br>mean messages %{x:.1f}<br>recall %{y:.3f}<extra></extra>"))
    fig.update_layout(xaxis_title="messages per question (mean)", yaxis_title="key-evidence recall",
                      yaxis_range=[0, 1], height=420, margin={"l": 40, "r": 10, "t": 30, "b": 40},
                      title=f"k = {run['k']}, split {split} ({len(part['scopes'])} scope(s))")
    return fig


def why_rows(run: dict, split: str) -> list[dict]:
    """The per-question `why` entries of a split (files written before it have none)."""
    groups = set(run["budget"]["splits"][split]["scopes"])
    return [w for w in run["budget"].get("why", []) if w.get("group") in groups]


def why_summary(run: dict, split: str) -> dict:
    """Units only T-Mem's windows found, only the global control found, both, over the split's questions."""
    rows = why_rows(run, split)
    return {"questions": len(rows), "windows only": sum(len(w["windows_only"]) for w in rows),
            "global only": sum(len(w["global_only"]) for w in rows), "both": sum(w["both"] for w in rows)}


def _beat(window: list, unit: str) -> str:
    """[where, anchors, density, threshold, background, messages] (tmem.evaluation.budget_recall.why) as text."""
    where, _, density, threshold, background, _ = window
    if background is None:
        return f"{where or 'scope'}: ρ {density:.3g}/{unit} > μ"
    return f"{where or 'scope'}: ρ {density:.3g} > μ* {threshold:.3g} (background {background:.3g}/{unit})"


def why_table(run: dict, split: str, only_differences: bool = True) -> pd.DataFrame:
    """Per question: the gold units only the windows found, only the global ranking found, and the rate each
    accepted window beat (its density against mu, or against App. F.1's mu* over the background rate)."""
    rows = []
    for w in why_rows(run, split):
        if only_differences and not (w["windows_only"] or w["global_only"]):
            continue
        rows.append({"question": w["question"], "group": w["group"],
                     "units": w["units"], "windows only": ", ".join(w["windows_only"]),
                     "global only": ", ".join(w["global_only"]), "both": w["both"], "messages": w["messages"],
                     "windows": len(w["windows"]), "rejected clusters": w.get("rejected_clusters", 0),
                     "rates beaten": "; ".join(_beat(x, w.get("unit", "hour")) for x in w["windows"])})
    columns = ["question", "group", "units", "windows only", "global only", "both", "messages", "windows",
               "rejected clusters", "rates beaten"]
    return pd.DataFrame(rows, columns=columns)
