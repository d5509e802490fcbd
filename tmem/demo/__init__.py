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
`data/demo.jsonl` into a store that lacks it (the front door `tmem.api.open_store` calls it), with the curated
question's shipped MiniLM vectors (`vectors`, data/demo-vectors.npz); the command `python -m tmem demo` is
tmem/commands/corpus/demo.py (`--vectors` regenerates the vectors file). Not imported here: `gold_edges` (the
generator plan's typed gold edges, written by scripts/demo_gold_edges.py) and `golden` (the hand-written golden
conversation that the tests and scripts/measure_batching.py run on; no generator output).
"""
from __future__ import annotations

from pathlib import Path

from tmem.corpora.jsonl import FORMAT as JSONL
from tmem.corpora.jsonl import load_jsonl_file
from tmem.demo.generator import DomainGenerator, generate
from tmem.demo.vectors import DEMO_VECTORS, install_demo_vectors
from tmem.demo.vocabulary import ABSTENTION, CURATED_QUESTION, DOMAINS, QUESTION_TYPES, SLOTS, START, T
from tmem.demo.writers import message_record, question_record, write_groupmembench, write_jsonl

DEMO_CORPUS = "demo"
DEMO_JSONL = Path(__file__).resolve().parent.parent.parent / "data" / "demo.jsonl"

__all__ = ["ABSTENTION", "CURATED_QUESTION", "DEMO_CORPUS", "DEMO_JSONL", "DEMO_VECTORS", "DOMAINS",
           "QUESTION_TYPES", "SLOTS", "START", "T", "DomainGenerator", "ensure_demo", "generate", "message_record",
           "question_record", "write_groupmembench", "write_jsonl"]


def ensure_demo(store, vectors: Path | None = DEMO_VECTORS) -> bool:
    """Load the shipped demo corpus into `store` when it has none (True when it loaded it), so the CLI and the app
    work right away on a fresh database; with it the shipped vectors of the curated question's messages (none when
    `vectors` is None), so its first answer embeds nothing."""
    if store.has_corpus(DEMO_CORPUS) or not DEMO_JSONL.exists():
        return False
    store.replace_corpus(DEMO_CORPUS, load_jsonl_file(DEMO_JSONL), format=JSONL.name, source=str(DEMO_JSONL))
    if vectors is not None:
        install_demo_vectors(store, DEMO_CORPUS, vectors)
    return True
