"""The models a memory system builds with (App. C.2): the memory-construction language model and the embedder,
with every call counted per construction stage (Table 6: tokens per stage).

The construction model is the run's memory-processing model, the evidence-utility role's endpoint (App. C.1 and
C.2 use one model, Deepseek-V4-Flash, for T-Mem's processing and the baselines' construction): the same endpoint
settings, key from the environment, concurrency bound, response cache and budget cap (tmem.models.llm). Each stage
of a system calls it under its own role name (`hipporag2:openie`), so the cache keeps its replies apart and a
killed ingestion resumes by replaying them. With the offline stand-ins there is no construction model: a system
that needs one raises `NeedsEndpoint` and does not run (the stand-ins are not that system). Under `run --estimate`
the client only counts (tmem.models.llm.dry_run): a call the cache cannot answer gets the system's stand-in reply,
so the calls after it are shaped on it, as the estimate of T-Mem's own stages is.
"""
from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from tmem.models.llm.dry_run import NotSent
from tmem.models.llm.failures import CallFailed
from tmem.types import Usage


class NeedsEndpoint(ValueError):
    """A system that builds its memory with a language model was asked to run without one."""


class IngestionFailed(RuntimeError):
    """A construction call failed after its retries: the memory is not built (a rerun resumes from the cache)."""


def construction_client(roles) -> tuple[Any, bool]:
    """(the client of the memory-processing model, counting only?); (None, False) when that role is offline."""
    role = roles.evidence_utility
    counted = getattr(role, "counted", None)  # an estimate's role (tmem.models.llm.dry_run.EstimatingRole)
    if counted is not None:
        return counted.client, True
    if getattr(role, "offline", True) or getattr(role, "client", None) is None:
        return None, False
    return role.client, False


def needs_endpoint_message(system) -> str:
    return (f"{system.name} ({system.label}) builds its memory with a language model, and the memory-processing "
            "role (evidence utility) has no endpoint: set --llm-base-url / --llm-model (or the utility role's) to "
            "run it. The offline stand-ins are not this system, so it does not run on them.")


class ConstructionLLM:
    """The construction model for one system: `ask` sends one call of a named stage and parses its JSON reply;
    usage is summed per stage (cached replays included, as `cached_calls`)."""

    def __init__(self, client, system: str, counting: bool = False):
        self.base, self.system, self.counting = client, system, counting
        self.usage: dict[str, Usage] = {}
        self.standins = 0  # estimate: calls answered by the system's stand-in reply
        self._clients: dict[tuple, Any] = {}
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return self.base.label

    def _client(self, stage: str, temperature: float | None, max_tokens: int | None):
        key = (stage, temperature, max_tokens)
        with self._lock:
            if key not in self._clients:
                self._clients[key] = derived_client(self.base, f"{self.system}:{stage}", temperature, max_tokens)
            return self._clients[key]

    def ask(self, stage: str, system_prompt: str, user: str, key: str, standin: Any, *,
            temperature: float | None = None, max_tokens: int | None = None) -> Any:
        """The parsed JSON object of the reply (it must have `key`); under an estimate, `standin` (the system's
        stand-in reply) on a cache miss. Raises IngestionFailed when the call fails after its retries."""
        from tmem.models.llm.openai_backend import parse_json_object  # the openai client loads with an endpoint

        client = self._client(stage, temperature, max_tokens)
        try:
            value, _, usage = client.complete(system_prompt, user, lambda text: parse_json_object(text, key))
        except NotSent:
            self._shape_estimate(client, standin)
            return standin
        except CallFailed as exc:
            self._add(stage, exc.usage)
            raise IngestionFailed(f"{self.system}: {stage} call failed: {exc}") from None
        self._add(stage, usage)
        return value

    def _shape_estimate(self, client, standin: Any) -> None:
        """An estimate's call the cache could not answer: with no measured reply of this stage, its expected
        completion is the stand-in reply's size (the stated prior of T-Mem's roles does not fit these prompts)."""
        expected, measured = client.expected_completion(None)
        with self._lock:
            self.standins += 1
            if not measured:
                tally = client.ledger.tallies.get(client.ledger.current[:2])
                if tally is not None:
                    tally.completion_tokens += client.inner.counter.count(json.dumps(standin)) - expected

    def _add(self, stage: str, usage: Usage) -> None:
        with self._lock:
            self.usage[stage] = self.usage.get(stage, Usage()) + usage


def derived_client(client, role: str, temperature: float | None, max_tokens: int | None):
    """`client` (a ChatClient, or an estimate's CountingClient around one) for another role name and decoding."""
    inner = getattr(client, "inner", None)
    if inner is not None and hasattr(client, "ledger"):  # CountingClient: same ledger, derived inner client
        return type(client)(derived_client(inner, role, temperature, max_tokens), client.ledger, client.store,
                            client.priors)
    changes: dict[str, Any] = {"role": role}
    if temperature is not None:
        changes["temperature"] = temperature
    if max_tokens is not None:
        changes["max_tokens"] = max_tokens
    return dataclasses.replace(client, settings=dataclasses.replace(client.settings, **changes))


class Tools:
    """What `ingest` and `retrieve` use: the construction model (None offline), the embedder and token counter,
    the embedding tokens spent per stage (Table 6 counts them), and `workdir`: the folder beside the run's database
    where a packaged system keeps its working files (None: the system's temporary folder)."""

    def __init__(self, llm: ConstructionLLM | None, embedder, counter, workdir=None):
        self.llm, self.embedder, self.counter, self.workdir = llm, embedder, counter, workdir
        self.embedded: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def estimating(self) -> bool:
        return self.llm is not None and self.llm.counting

    def embed(self, stage: str, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        tokens = sum(self.counter.count(t) for t in texts)
        with self._lock:
            self.embedded[stage] = self.embedded.get(stage, 0) + tokens
        return np.asarray(self.embedder.embed(texts, kind), dtype=np.float32)

    def ask(self, *args, **kwargs) -> Any:
        if self.llm is None:
            raise NeedsEndpoint("no construction model")
        return self.llm.ask(*args, **kwargs)

    def usage_record(self) -> dict[str, dict]:
        """{stage: usage} of the language-model calls and {stage (embedding): tokens} of the embeddings."""
        out = {stage: dataclasses.asdict(u) for stage, u in (self.llm.usage if self.llm else {}).items()}
        for stage, tokens in self.embedded.items():
            out[f"{stage} (embedding)"] = {"prompt_tokens": tokens, "completion_tokens": 0, "calls": 0,
                                           "cached_calls": 0, "source": f"counted:{self.counter.name}"}
        return out
