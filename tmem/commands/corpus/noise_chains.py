"""`python -m tmem noise-chains --corpus demo --k 2 --out PATH [--writer endpoint | --templates FILE]`: a new JSONL
corpus with an injected revision-noise chain (k revisions and a rollback, gold UPDATE edges) after the current state
of every question with a gold UPDATE chain (tmem.evaluation.noise_chains, paper Exp-5). The text is written by the
answer-model endpoint (`--writer endpoint`, as the paper's chains were), by your templates, or by offline templates
that only test the plumbing; the output names its writer. Never written over an existing file, and only once every
chain is written; import it with `python -m tmem import jsonl PATH --corpus NAME`."""
from __future__ import annotations

import argparse
from pathlib import Path

from tmem.api import open_store
from tmem.api.models import roles_for, settings_budget
from tmem.commands.flags import add_backend_arguments, settings_from_args
from tmem.evaluation.noise_chains import endpoint_writer, inject, load_templates, template_writer, write_corpus
from tmem.types import CorpusData

WRITERS = ("templates", "endpoint")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--corpus", required=True, help="stored corpus with gold UPDATE chains (e.g. demo)")
    parser.add_argument("--out", type=Path, required=True, help="the new corpus's JSONL file (must not exist)")
    parser.add_argument("--k", type=int, default=2, help="intermediate revisions per chain (default 2)")
    parser.add_argument("--writer", choices=WRITERS, default="templates",
                        help="who writes the text: 'endpoint' = the answer role's model (one call per chain, as "
                             "the paper's chains were written; needs an endpoint), 'templates' = --templates FILE "
                             "or the offline plumbing templates (default)")
    parser.add_argument("--templates", type=Path, default=None,
                        help="JSON {\"revision\": [...], \"rollback\": [...]} with {text} {author} {i} {k}; "
                             "default: offline templates, for the plumbing only")
    parser.add_argument("--limit", type=int, default=None, help="at most this many chains")
    parser.add_argument("--db", type=Path, default=None, help="DuckDB file (default: $TMEM_DB or data/tmem.duckdb)")
    add_backend_arguments(parser)


def main(args: argparse.Namespace) -> int:
    if args.out.exists():
        raise FileExistsError(f"{args.out}: exists; a noise corpus is written to a new file, never over another")
    settings = endpoint_settings(args) if args.writer == "endpoint" else None  # refused before the database opens
    if settings is None:
        templates, writer_name = load_templates(args.templates)
        writer = template_writer(templates)
    store = open_store(args.db)
    try:
        if args.corpus not in store.corpora():
            raise ValueError(f"no corpus {args.corpus!r} in {store.path}")
        data = stored_corpus(store, args.corpus)
        budget = None
        if settings is not None:  # the answer role as `run` builds it: cache in this database, budget cap, usage
            budget = settings_budget(settings)
            client = roles_for(settings, store=store, budget=budget).answer.client
            writer, writer_name = endpoint_writer(client), f"endpoint {client.label}"
        result = inject(data, args.k, writer, writer_name, args.limit)  # every chain, or an error and no file
    finally:
        store.close()
    write_corpus(result, args.out)
    print(f"{result.chains} noise chain(s) of {args.k} revision(s) and a rollback written to {args.out}; "
          f"text by {result.writer}"
          + (" — offline plumbing templates: not the paper's model-written chains" if result.plumbing else "")
          + "; each injected message and gold edge names its writer (field noise_writer)")
    if budget is not None:
        spent = budget.total
        print(f"endpoint usage: {spent.calls} call(s), {spent.prompt_tokens} prompt / {spent.completion_tokens} "
              f"completion tokens (cached replies not counted)")
    return 0


def endpoint_settings(args: argparse.Namespace):
    """The backend settings when the answer role has a live endpoint; refused otherwise (the plumbing templates are
    never used in its place)."""
    if args.templates is not None:
        raise ValueError("--templates and --writer endpoint are exclusive: the endpoint writes the text")
    settings = settings_from_args(args)
    backend = settings.role("answer").backend
    if backend in ("offline", "recorded"):
        raise ValueError(f"--writer endpoint needs an answer-model endpoint, and the answer role is {backend}: set "
                         f"TMEM_LLM_MODEL and TMEM_LLM_BASE_URL (or --llm-model / --llm-base-url); see "
                         f"docs/backends.md")
    return settings


def stored_corpus(store, corpus: str) -> CorpusData:
    scopes, questions = store.scopes(corpus), store.questions(corpus)
    return CorpusData([m for s in scopes for m in store.messages(corpus, s)], questions,
                      [(q.scope, store.gold(corpus, q.scope, q.id)) for q in questions],
                      [(s, c, p, r) for s in scopes for c, p, r in store.gold_edges(corpus, s) if p])
