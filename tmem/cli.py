"""Command-line entry point (`tmem` or `python -m tmem`). Each command is a module exposing `add_arguments(parser)`
and `main(args) -> int` (the pattern: tmem/commands/__init__.py); a command's module is imported only when that
command runs, so `tmem --help` stays fast."""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from tmem.limits import strip_control
from tmem.types import CorpusError

COMMANDS: dict[str, tuple[str, str]] = {
    "app": ("tmem.commands.app", "Serve the explorer (streamlit run app.py), its libraries loaded while it starts."),
    "ask": ("tmem.commands.ask", "Run one question through the pipeline and print the forest (or the trace as JSON)."),
    "import": ("tmem.commands.corpus.import_",
               "Import a corpus (groupmembench, evermembench, locomo, jsonl, slack, irc)."),
    "interleave": ("tmem.commands.corpus.interleave",
                   "LoCoMo's conversations as channels of one scope, clocks overlapping "
                   "(an interleaved recall benchmark with a dev/test split by conversation)."),
    "demo": ("tmem.commands.corpus.demo", "Generate the deterministic demo corpus (GroupMemBench layout + questions)."),
    "noise-chains": ("tmem.commands.corpus.noise_chains",
                     "A new corpus with injected revision-noise chains (k revisions + a rollback; paper Exp-5)."),
    "backends": ("tmem.commands.backends", "Show which backend and model each role uses, from env / config / flags."),
    "run": ("tmem.commands.evaluate.run", "Stage-wise batch run of variants over a corpus's questions, with resume."),
    "recall": ("tmem.commands.evaluate.recall", "Evidence recall (paper Exp-2) per retrieval variant and k."),
    "sweep": ("tmem.commands.evaluate.sweep",
              "Measure recall (or accuracy) over a grid of parameters; resumes; local or Ray."),
    "tuning": ("tmem.commands.evaluate.tuning",
               "Tuned constants: their dev/test splits and the hash the docs table carries."),
    "fit-relation": ("tmem.commands.evaluate.fit_relation",
                     "Fit the fitted relation role's weights on dev gold edges."),
    "links": ("tmem.commands.evaluate.links",
              "Score structuring against gold edges (IRC reply links, typed case edges)."),
    "report": ("tmem.commands.evaluate.report",
               "A stored run as a static site: intervals, failures, notes, what-if on k."),
    "annotate": ("tmem.commands.evaluate.annotate",
                 "Label and note a trace of a stored run; list, count and export them."),
    "gold": ("tmem.commands.corpus.gold", "Gold corrections as named versions; re-score a stored run under one."),
    "figures": ("tmem.commands.evaluate.figures",
                "Re-measure every figure the docs state about the shipped demo into docs/figures.json."),
    "bench": ("tmem.commands.evaluate.bench", "Performance benchmark on a generated 120,000-message corpus."),
    "record-demo": ("tmem.commands.corpus.record_demo",
                    "Record the local model's replies to the demo's curated questions "
                    "(data/recorded-local.json, replayed by --backend recorded)."),
}


def build_parser(command: str | None = None) -> tuple[argparse.ArgumentParser, dict]:
    """The full parser for one command (its module imported), or the overview of all commands."""
    parser = argparse.ArgumentParser(
        prog="tmem" if Path(sys.argv[0]).name == "tmem" else "python -m tmem",
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


class TerminalLines:
    """sys.stdout or sys.stderr while a command runs: everything it prints passes limits.strip_control, so no
    escape sequence from the data (OSC 52 clipboard writes, colours, the window title) reaches the terminal, whichever
    line prints it. A carriage return is kept: the progress bar redraws its line with it."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write("\r".join(strip_control(part) for part in text.split("\r")))
        return len(text)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str):  # flush, isatty, fileno, encoding, ... of the stream itself
        return getattr(self.stream, name)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["app"]:  # streamlit's own server log; the app escapes what it shows
        return _main(argv)
    streams = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = TerminalLines(sys.stdout), TerminalLines(sys.stderr)
    try:
        return _main(argv)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        sys.stdout, sys.stderr = streams


def _main(argv: list[str]) -> int:
    parser, modules = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    if not args.command:
        parser.print_help()
        return 2
    try:
        return int(modules[args.command].main(args) or 0)
    except (CorpusError, KeyError, ValueError, OSError) as exc:  # OSError: a missing or unreadable path
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"error: {strip_control(str(message))}", file=sys.stderr)
        return 1
    except (RecursionError, MemoryError) as exc:  # input past a bound no check caught: one line, not a traceback
        print(f"error: the input is too large or too deeply nested for this command ({type(exc).__name__})",
              file=sys.stderr)
        return 1
