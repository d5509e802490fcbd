"""The command-line commands: one module per command, thin over the library, grouped by what they do: corpus/
puts data in the store (import, interleave, demo, record-demo, gold), evaluate/ runs and scores the pipeline over a
corpus (run, sweep, recall, links, bench, report, tuning, fit-relation, annotate); app, ask and backends sit here.

The pattern every command follows (`tmem/commands/ask.py` is the example):

- `tmem/commands/[<group>/]<name>.py` exposes `add_arguments(parser)` and `main(args) -> int`, and is registered in
  `tmem.cli.COMMANDS` as `"<name>": ("tmem.commands.[<group>.]<name>", "one-line help")`.
- `add_arguments` only declares flags (those several commands share: `tmem/commands/flags.py`). `main` turns the
  parsed flags into plain values, calls library functions (the front door `tmem.api`, or a library module such as
  `tmem.evaluation.recall`) that take typed arguments and return results, then prints those results. All argparse
  and all printing live here; library modules never see an `argparse.Namespace` and never print (they may take a
  `log` callable for progress lines).
- Bad input raises one clear `ValueError` / `KeyError` / `CorpusError` naming file, record and field;
  `tmem.cli.main` prints it as one `error:` line and returns 1, so no traceback reaches the user.
- Imports sit at the top of the module. `python -m tmem --help` stays fast because `tmem.cli` imports a command's
  module only when that command runs; an optional heavy dependency (ray, xllamacpp, playwright) is imported where it
  is used, behind the check that says it is missing.
- Formatting helpers for the terminal (tables, trace summaries) live in the command module that prints them.
"""
