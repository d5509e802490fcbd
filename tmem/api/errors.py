"""What can go wrong behind the front door, by name: the failures the CLI and the app catch and explain (the app's
callouts, pages/_callouts.py; the CLI's one-line errors, tmem/cli.py). Each is raised where it happens; this
module only names them for the callers."""
from __future__ import annotations

from tmem.models.llm.cache import ReplayMissError
from tmem.models.llm.concurrency import CircuitOpen
from tmem.models.llm.failures import CallFailed  # not openai_backend: the openai client loads only when a role calls
from tmem.models.local.recorded import StaleRecording
from tmem.models.local.server import LocalBackendMissing
from tmem.store import StoreInUse
from tmem.types import CorpusError

__all__ = ["CallFailed", "CircuitOpen", "CorpusError", "LocalBackendMissing", "ReplayMissError", "StaleRecording",
           "StoreInUse"]
