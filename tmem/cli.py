"""Command-line entry point. Each command is a module exposing `add_arguments(parser)` and `main(args) -> int`;
command modules keep heavy imports inside `main` so that `python -m tmem --help` stays fast."""
from __future__ import annotations

import argparse
import importlib
import sys

from tmem.store import CorpusError

COMMANDS: dict[str, tuple[str, str]] = {
    "ask": ("tmem.commands.ask", "Run one question through the pipeline and print the forest (or the trace as JSON)."),
    "import": ("tmem.corpora.cli", "Import a corpus (groupmembench, evermembench, locomo, jsonl, slack, irc)."),
    "demo": ("tmem.demo", "Generate the deterministic demo corpus (GroupMemBench layout + questions)."),
    "backends": ("tmem.models.cli", "Show which backend and model each role uses, from env / config / flags."),
    "run": ("tmem.evaluation.batch", "Stage-wise batch run of variants over a corpus's questions, with resume."),
    "recall": ("tmem.evaluation.recall", "Evidence recall (paper Exp-2) per retrieval variant and k."),
    "links": ("tmem.evaluation.links", "Score structuring's parent choice against human reply-to links."),
    "bench": ("tmem.evaluation.bench", "Performance benchmark on a generated 120,000-message corpus."),
}


def build_parser(command: str | None = None) -> tuple[argparse.ArgumentParser, dict]:
    """The full parser for one command (its module imported), or the overview of all commands."""
    parser = argparse.ArgumentParser(
        prog="python -m tmem",
        description="T-Mem: temporal evidence forests for long multi-party conversational memory.",
        epilog="Run 'python -m tmem COMMAND --help' for a command's options.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    modules = {}
    for name, (module_name, help_text) in COMMANDS.items():
        command_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:
            modules[name] = importlib.import_module(module_name)
            modules[name].add_arguments(command_parser)
    return parser, modules


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser, modules = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return int(modules[args.command].main(args) or 0)
    except (CorpusError, KeyError, ValueError, FileNotFoundError) as exc:
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {message}", file=sys.stderr)
        return 1
