"""What can go wrong behind the front door, by name: the failures the CLI and the app catch and explain (the app's
callouts, pages/_callouts.py; the CLI's one-line errors, tmem/cli.py). Each is raised where it happens; this
module only names them for the callers."""
from __future__ import annotations

from tmem.models.cache import ReplayMissError
from tmem.models.concurrency import CircuitOpen
from tmem.models.failures import CallFailed  # not openai_backend: the openai client loads only when a role calls
from tmem.models.local import LocalBackendMissing
from tmem.models.recorded import StaleRecording
from tmem.store import StoreInUse
from tmem.types import CorpusError

__all__ = ["CallFailed", "CircuitOpen", "CorpusError", "LocalBackendMissing", "ReplayMissError", "StaleRecording",
           "StoreInUse"]
