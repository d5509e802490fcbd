"""Tokens and cost so far of a run folder (`<out>/spend.json`): what the run's model calls sent, over all its passes,
in all and per stage, with the cap it runs under.

The batch run rewrites the file (atomically, at most once a second) as records are written, from the roles' spend
meter (tmem.models.llm.budget_cap); a resumed run starts from the file's total, so `--max-cost` caps the whole run,
not each pass, and the app's batch (one `run` per variant) reads one running figure. Replies served from the cache
cost nothing and are not in it; a batch API's replies are (at the prices given).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from tmem.models.llm.budget_cap import Budget, Spent

SPEND_FILE = "spend.json"


def read_spend(out: Path) -> dict:
    try:
        data = json.loads((Path(out) / SPEND_FILE).read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def earlier_spend(out: Path) -> Spent:
    """What earlier passes of the run folder sent (zero for a new folder). A total that is not a count (negative,
    NaN, text) is refused: a cap counted from it would not hold (a total of -9.9 M tokens once let a resumed run
    spend 105,989 tokens under a 30,000 cap)."""
    total = read_spend(out).get("total") or {}
    counts = []
    for field in ("prompt_tokens", "completion_tokens", "calls"):
        value = total.get(field, 0) if isinstance(total, dict) else total
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{Path(out) / SPEND_FILE}: 'total' {field} must be a count >= 0, got "
                             f"{str(value)[:40]!r}; what earlier passes spent is unknown, so a cap cannot hold: "
                             "check the file, or delete it to count from zero")
        counts.append(value)
    return Spent(*counts)


class SpendFile:
    """Keeps `<out>/spend.json` up to date with a budget's meter (earlier passes' stages added)."""

    def __init__(self, out: Path, budget: Budget, min_interval: float = 1.0):
        self.path, self.budget, self.min_interval = Path(out) / SPEND_FILE, budget, min_interval
        self.earlier_stages = read_spend(out).get("stages") or {}
        self._written = 0.0

    def body(self) -> dict:
        snap = self.budget.snapshot()
        stages = {k: dict(v) for k, v in self.earlier_stages.items()}
        for name, s in snap["stages"].items():
            old = stages.get(name, {})
            merged = {k: (old.get(k) or 0) + (s.get(k) or 0) for k in ("calls", "prompt_tokens", "completion_tokens")}
            merged["cost_usd"] = round(self.budget.prices.cost(merged["prompt_tokens"], merged["completion_tokens"]),
                                       6) if self.budget.prices.configured else None
            stages[name] = merged
        return {**snap, "stages": stages, "stages_this_pass": snap["stages"],
                "updated_at": time.strftime("%Y-%m-%dT%H:%M:%S"), "pid": os.getpid()}

    def update(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._written < self.min_interval:
            return
        self._written = now
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".json.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(self.body(), indent=1), encoding="utf-8")
        os.replace(tmp, self.path)


def spend_note(out: Path | None) -> str:
    """One line for a progress view: tokens and cost so far, and the cap (empty before a model call was sent)."""
    data = read_spend(out) if out is not None else {}
    total = data.get("total") or {}
    if not total.get("calls"):
        return ""
    cost = total.get("cost_usd")
    cap = " of the " + " / ".join(filter(None, [f"{data['max_cost']:g} USD" if data.get("max_cost") else "",
                                                f"{data['max_tokens']:,} token" if data.get("max_tokens") else ""])) \
        + " cap" if data.get("max_cost") or data.get("max_tokens") else ""
    line = (f"model calls so far: {total['calls']:,}, {total.get('prompt_tokens', 0):,} prompt + "
            f"{total.get('completion_tokens', 0):,} completion tokens"
            + (f", {cost:.4f} USD" if cost is not None else "") + cap)
    return line + (f" — stopped: {data['stopped']}" if data.get("stopped") else "")
