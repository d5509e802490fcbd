"""Recall against messages: the budget-matched table and the recall-vs-messages curve of a recall
file written by `python -m tmem recall --out data/recall/NAME.json` (tmem.evaluation.budget_recall). Pure functions
over the file's JSON; the page (pages/recall.py) only loads and renders."""
from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from tmem.viz.charts import legend_and_svg, swatch
from tmem.viz.safe import esc

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


HEIGHT, TOP, BOTTOM = 380, 14, 44  # px: the chart's height and margins (its width is the page's)
LEFT, RIGHT = 6.0, 98.0  # % of the width: the recall column, the plot's right end


def _step(top: float) -> float:
    """A round tick step (1, 2, 5 x 10^n) giving at most six ticks up to `top`."""
    step = 10.0 ** math.floor(math.log10(max(top, 1e-9)))
    for factor in (0.1, 0.2, 0.5, 1, 2, 5, 10):
        if top / (step * factor) <= 6:
            return step * factor
    return step * 10


def curve_svg(run: dict, split: str) -> str:
    """Recall against mean messages per question, one line per method (a <title> on each point: its budget, mean
    messages and recall) and T-Mem's unbudgeted point R'(q) as a star; a legend and the run's k and split above.
    SVG in the page, not plotly (docs/app.md, "Browser work per page"): horizontal positions in % of the width,
    so its text keeps its size. Method names are escaped; one line (st.markdown)."""
    part = run["budget"]["splits"][split]
    own = part["matched"]["tmem"]
    points = [p for series in part["curve"].values() for p in series] + [own]
    top = max(p["mean_messages"] for p in points) * 1.05 or 1.0
    step = _step(top)
    x = lambda m: LEFT + (RIGHT - LEFT) * m / top  # noqa: E731 - % of the width
    y = lambda r: TOP + (HEIGHT - TOP - BOTTOM) * (1 - r)  # noqa: E731 - px
    body = []
    for r in (0, 0.25, 0.5, 0.75, 1):
        body.append(f'<line x1="{LEFT}%" x2="{RIGHT}%" y1="{y(r):.1f}" y2="{y(r):.1f}" stroke="#e5e8ef"/>'
                    f'<text x="{LEFT - 0.5}%" y="{y(r) + 4:.1f}" font-size="11" text-anchor="end" fill="#555">'
                    f"{r:g}</text>")
    tick = 0.0
    while tick <= top:
        body.append(f'<text x="{x(tick):.2f}%" y="{HEIGHT - BOTTOM + 16}" font-size="11" text-anchor="middle" '
                    f'fill="#555">{tick:g}</text>')
        tick += step
    body.append(f'<text x="50%" y="{HEIGHT - 6}" font-size="11" text-anchor="middle" fill="#555">messages per '
                'question (mean); up: key-evidence recall</text>')
    legend = [f"<b>k = {int(run['k'])}, split {esc(split)} ({len(part['scopes'])} scope(s))</b>"]
    for name, series in part["curve"].items():
        colour = COLOURS.get(name, "#333")
        legend.append(swatch(colour, esc(name), 14, 3, "vertical-align:middle;"))
        for a, b in zip(series, series[1:]):
            body.append(f'<line x1="{x(a["mean_messages"]):.2f}%" x2="{x(b["mean_messages"]):.2f}%" '
                        f'y1="{y(a["recall"]):.1f}" y2="{y(b["recall"]):.1f}" stroke="{colour}" stroke-width="2"/>')
        for p in series:
            body.append(f'<circle cx="{x(p["mean_messages"]):.2f}%" cy="{y(p["recall"]):.1f}" r="4" fill="{colour}">'
                        f'<title>{esc(name)} · budget {esc(p["budget"])}: {p["mean_messages"]:.1f} messages, recall '
                        f'{p["recall"]:.3f}</title></circle>')
    legend.append(f'<span style="white-space:nowrap;color:{COLOURS["tmem"]}">★ tmem, R\'(q)</span>')
    body.append(f'<text x="{x(own["mean_messages"]):.2f}%" y="{y(own["recall"]) + 7:.1f}" font-size="20" '
                f'text-anchor="middle" fill="{COLOURS["tmem"]}"><title>T-Mem R\'(q): {own["mean_messages"]:.1f} '
                f'messages, recall {own["recall"]:.3f}</title>★</text>')
    return legend_and_svg("".join(legend), body, HEIGHT, "recall against messages", LEFT)


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
