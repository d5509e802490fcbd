"""Flags more than one command takes: the backend settings (every key of tmem.models.settings.SETTINGS that has
a flag) and whole-number counts."""
from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from tmem.api.backends import ROLES, SETTINGS, BackendSettings
from tmem.limits import number_in


def add_backend_arguments(parser: argparse.ArgumentParser) -> None:
    """The shared backend flags of every command (ask, run, backends, ...)."""
    group = parser.add_argument_group("model backends (also: environment variables, tmem.toml; see docs/backends.md)")
    group.add_argument("--backend-config", metavar="PATH", help="TOML file with backend settings.")
    group.add_argument("--offline", action="store_true", help="Use the offline stand-ins for all four roles.")
    for s in SETTINGS.values():
        if s.flag:
            group.add_argument(s.flag, dest="backend__" + s.key.replace(".", "__"), default=None,
                               metavar=s.key.rsplit(".", 1)[-1].upper(), help=f"{s.help} [{s.env}]")


def settings_from_args(args: argparse.Namespace, env: Mapping[str, str] | None = None) -> BackendSettings:
    """The backend settings with the flags of `add_backend_arguments` over the other sources."""
    overrides = {k[len("backend__"):].replace("__", "."): v for k, v in vars(args).items()
                 if k.startswith("backend__") and v is not None}
    if getattr(args, "offline", False):
        overrides.update({f"roles.{r}.backend": "offline" for r in ROLES})
    return BackendSettings.from_sources(env, getattr(args, "backend_config", None), overrides)


def folder_path(text: str) -> Path:
    """argparse type for an output folder: not an empty name (`--out ""` wrote into the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty folder name; give a folder (e.g. runs/report)")
    return Path(text)


def positive_int(text: str) -> int:
    """argparse type for counts such as --k, --limit, --jobs: a whole number >= 1 (a k of 0 or less would
    retrieve nothing without a word, --limit -1 ran every question but the last, --jobs 0 none)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def number(kind: type, low: float, high: float):
    """argparse type for a whole or finite number from `low` to `high` (limits.number_in): NaN, Infinity and
    out-of-range values are refused with the range."""
    parse = number_in(kind, low, high)

    def checked(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{exc}, got {text!r}") from None
    checked.__name__ = "whole number" if kind is int else "number"  # argparse's "invalid <name> value"
    return checked
