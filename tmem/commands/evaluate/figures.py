"""`python -m tmem figures [--check] [--out FILE]`: re-measure every figure README.md and docs/*.md state about the
shipped demo, on a new database, and write them with the time and commit to docs/figures.json
(tmem.evaluation.figures; tests/test_figures.py checks the documents against the file). `--check` compares a
fresh measurement with the file instead and fails on a difference. Minutes: it runs the demo batch and `recall`."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from tmem import api
from tmem.evaluation import figures
from tmem.evaluation.report import build


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=figures.FILE, help="the figures file (default docs/figures.json)")
    parser.add_argument("--check", action="store_true", help="compare a fresh measurement with the file; write nothing")


def _tmem(*argv: str) -> str:
    done = subprocess.run([sys.executable, "-m", "tmem", *argv], capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"`tmem {argv[0]}` failed: {done.stderr.strip().splitlines()[-1:]}")
    return done.stdout


def measure(folder: Path, log) -> dict[str, str]:
    db = str(folder / "figures.duckdb")
    log("demo batch (offline) …")
    _tmem("run", "--db", db, "--corpus", "demo", "--variants", ",".join(figures.DEMO_VARIANTS), "--out",
          str(folder / "run"), "--offline", "--quiet", "--json")
    summary = json.loads((folder / "run" / "summary.json").read_text(encoding="utf-8"))
    log("budget-matched recall at k = 36 …")
    recall = json.loads(_tmem("recall", "--db", db, "--corpus", "demo", "--k", "36", "--json", "--quiet"))
    store = api.open_store(db)
    try:
        log("report rows: stale rules, what-if on k …")
        site = build(store, "demo", summary["run_id"])
        rules: dict[str, dict[str, int]] = {}
        for r in site.rows[site.rows["stale"].fillna(False).astype(bool)].to_dict("records"):
            rule = "forest rule" if "forest's UPDATE edge" in str(r["stale_detail"]) else "gold rule"
            rules.setdefault(r["variant"], {}).setdefault(rule, 0)
            rules[r["variant"]][rule] += 1
        _, units, _ = site.whatif["full"]
        reached = {k: sum(u.rank is not None and u.rank <= k for u in units) for k in figures.WHATIF_KS}
        log(f"evidence complete at B = 8,192 and B = {figures.SMALL_B} …")
        roles = api.build_roles({"backend.preset": "offline"}, store)
        # the batch's records of the stages before compression are reused (full, flat, no-structuring)
        budgets = figures.budget_counts(store, "demo", roles,
                                        recorded=figures.batch_records(store, "demo", folder / "run", roles))
    finally:
        store.close()
    matched = recall["budget"]["splits"]["all"]["matched"]
    return {**figures.from_batch(summary, rules), **figures.recall_figures(matched),
            "whatif_sentence": figures.whatif_sentence(sum(u.found for u in units), len(units), reached),
            "budget_sentence": figures.budget_sentence(budgets)}


def main(args: argparse.Namespace) -> int:
    log = lambda s: print(s, file=sys.stderr)  # noqa: E731
    commit = _commit()  # the code measured, taken before the minutes the measurement takes
    with tempfile.TemporaryDirectory(prefix="tmem-figures-") as tmp:
        fresh = measure(Path(tmp), log)
    if args.check:
        stored = figures.read(args.out)["figures"]
        differ = {k: (stored.get(k), v) for k, v in fresh.items() if stored.get(k) != v}
        for k, (old, new) in differ.items():
            print(f"{k}: file {old!r}, fresh {new!r}")
        print("figures match the file" if not differ else f"{len(differ)} figure(s) differ from {args.out}")
        return 1 if differ else 0
    args.out.write_text(json.dumps({"measured_at": datetime.now(UTC).isoformat(timespec="seconds"),
                                    "commit": commit, "corpus": "shipped demo (data/demo.jsonl), offline roles",
                                    "figures": fresh}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(fresh)} figures written to {args.out} (commit {commit}); now edit the sentences of "
          "tmem.evaluation.figures.STATED that tests/test_figures.py names")
    return 0


def _commit() -> str:
    """The short commit, "+dirty" when the working tree has changes ("unknown" outside a git checkout)."""
    here = Path(__file__).resolve().parent
    run = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, cwd=here, check=False)  # noqa: E731
    head = run("rev-parse", "--short", "HEAD").stdout.strip()
    if not head:
        return "unknown"
    return head + ("+dirty" if run("status", "--porcelain", "--untracked-files=no").stdout.strip() else "")
