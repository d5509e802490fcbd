"""The failures of a call to a model endpoint, apart from its transport (`tmem.models.llm.openai_backend`), so the
explorer and the roles' callers can name them without importing the openai client (about a second of a first
start)."""
from __future__ import annotations

from tmem.types import Usage


class MalformedReply(ValueError):
    """The reply was empty or could not be parsed; retried like a transient fault."""


class CallFailed(RuntimeError):
    """All attempts failed; carries the tokens the failed attempts spent."""

    def __init__(self, message: str, usage: Usage):
        super().__init__(message)
        self.usage = usage
