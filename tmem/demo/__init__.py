"""The demo corpus: a deterministic generator of realistic multi-party project chat in the GroupMemBench
layout (paper App. A.1), with questions of the six GroupMemBench types, gold answers and gold evidence units.

Each domain is one memory scope: 6-12 people with roles, three project channels with three topics each, five
phases per channel (stage, phase_order, phase_progress), six weeks of working-hours bursts. Decisions on a
(component, aspect) pair evolve: proposed, discussed, confirmed, questioned, revised or rolled back, amid
interleaved chatter, status pings and look-alike messages from other episodes.

Knowledge-update questions are built so that the T-Mem mechanism visibly matters (Sec. 4.2-4.3, App. G.1): the
decisive update uses none of the question's words (BM25 ranks it low) but replies, within hours and in the same
topic, to a challenge that several high-BM25 messages discuss (temporal discovery recovers it); it carries a
revision cue ("instead", "no longer", "roll back", ...) and repeats the earlier value, so an UPDATE edge links it
to the earlier state. Only `random.Random` seeded per domain (string seeds hash with SHA-512, not `hash()`), no
set iteration, floats rounded to two decimals: the output is byte-identical across runs and machines.

The package: `vocabulary` (domains, templates, question types), `generator` (`generate(seed, messages, domains)
-> CorpusData`), `writers` (tmem JSONL, GroupMemBench layout). `ensure_demo(store)` loads the shipped
`data/demo.jsonl` into a store that lacks it (the front door `tmem.api.open_store` calls it), with the shipped
MiniLM vectors of every message and question (`vectors`, data/demo-vectors.npz), and the shipped sweep (`sweep`,
data/demo-sweep.jsonl). Its gold links are the generator's planned edges (`planned`): scored, never fitted on
(`provenance` marks the corpus as generated, and `python -m tmem fit-relation` refuses it). The command
`python -m tmem demo` is tmem/commands/corpus/demo.py (`--vectors` and `--sweep` regenerate those files).
"""
from __future__ import annotations

from pathlib import Path

from tmem.corpora.jsonl import FORMAT as JSONL
from tmem.corpora.jsonl import load_jsonl_file
from tmem.demo.generator import DomainGenerator, generate
from tmem.demo.planned import PLANNED_EDGES
from tmem.demo.provenance import NOTE, generated_reason
from tmem.demo.sweep import DEMO_SWEEP, install_demo_sweep
from tmem.demo.vectors import DEMO_VECTORS, install_demo_vectors
from tmem.demo.vocabulary import ABSTENTION, CURATED_QUESTION, DOMAINS, QUESTION_TYPES, SLOTS, START, T
from tmem.demo.writers import message_record, question_record, write_groupmembench, write_jsonl

DEMO_CORPUS = "demo"
DEMO_JSONL = Path(__file__).resolve().parent.parent.parent / "data" / "demo.jsonl"

__all__ = ["ABSTENTION", "CURATED_QUESTION", "DEMO_CORPUS", "DEMO_JSONL", "DEMO_SWEEP", "DEMO_VECTORS", "DOMAINS",
           "PLANNED_EDGES", "QUESTION_TYPES", "SLOTS", "START", "T", "DomainGenerator", "ensure_demo", "generate",
           "generated_corpus", "message_record", "question_record", "write_groupmembench", "write_jsonl"]


def ensure_demo(store, vectors: Path | None = DEMO_VECTORS, sweep: Path | None = DEMO_SWEEP) -> bool:
    """Load the shipped demo corpus into `store` when it has none (True when it loaded it), so the CLI and the app
    work right away on a fresh database: its gold links are the generator's planned edges, so the Structuring page
    scores its forests. With it the shipped vectors of every demo message and question (none when `vectors` is
    None), so its first answer and its demo batch embed nothing, and the shipped sweep (none when `sweep` is None)
    for the Sweep page."""
    if store.has_corpus(DEMO_CORPUS) or not DEMO_JSONL.exists():
        return False
    store.replace_corpus(DEMO_CORPUS, load_jsonl_file(DEMO_JSONL), format=JSONL.name, source=str(DEMO_JSONL),
                         notes=NOTE)
    if vectors is not None:
        install_demo_vectors(store, DEMO_CORPUS, vectors)
    if sweep is not None:
        install_demo_sweep(store, DEMO_CORPUS, sweep)
    return True


def generated_corpus(store, corpus: str) -> str | None:
    """Why `corpus` in `store` was written by the demo generator (tmem.demo.provenance), or None: its gold is then
    the generator's plan, for scoring only. KeyError for an unknown corpus."""
    return generated_reason(store.corpus_info(corpus), DEMO_JSONL)
