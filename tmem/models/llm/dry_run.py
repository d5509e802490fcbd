"""Model calls counted, not sent: the roles of a cost estimate (`run --estimate`, tmem.evaluation.batch.estimate).

Each language-model role keeps its own prompt builder (App. J / K / I messages, exactly what a run sends) but its
client is a `CountingClient`: it counts the request's prompt tokens (o200k, with the chat format's tokens per
message), looks the request up in the response cache, and sends nothing. A cached reply is a hit: it costs
nothing and is used as the reply, so the stages after it see what the model really said. A miss is counted with
the completion the role is expected to write — measured where there is a measurement (the mean of this role and
model's past replies in the cache, else of the calls stored traces made with this role's exact backend), else a
stated prior per role read from its prompt's reply schema (`prior_completion`) — and the role's offline stand-in
answers instead (`EstimatingRole`), so the later stages get plausible inputs: the relation calls need a selection,
the answer a forest, the judge an answer. The stand-in is shaped like the model: it selects the share of candidates
the model's cached replies kept, else the prior's count per window, and its answers take the model's measured (else
the prior's) length. So the calls follow the pipeline's real branching (windows, children with candidates) on the
corpus, with the model's choices stood in for; prompts built on a stand-in's output are estimates, and the ledger
says how many.
"""
from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from typing import Any

from tmem.models.factory import offline_role, online_role
from tmem.models.llm.cache import past_completions, request_key
from tmem.models.llm.tokens import chat_prompt_tokens
from tmem.models.settings import ROLES
from tmem.types import KEY, UPDATE, Selection, Usage

# ------------------------------------------------------------------ the stated priors (no measurement of the model)
# App. J's gate keeps "decisive evidence and strictly necessary support" (tmem/prompts/evidence_utility.txt): one
# message per window. Measured: the recorded local model kept 1 of its window's candidates (data/recorded-local.json),
# and a question run with a real model made ~33 relation calls (docs/backends.md), what one kept per window gives.
PRIOR_KEPT_PER_WINDOW = 1
PRIOR_REASON = "it states the asked state directly and is the latest message on it"  # "<short reason>", 13 words
# App. I asks for "a direct, concise answer": one sentence (the recorded local model's 14 answers: 21 tokens).
PRIOR_ANSWER_TOKENS = 20
PRIOR_JUDGEMENT = "Final: Correct"  # App. I: "Output only Final: Correct or Final: Incorrect"
STAGE_ROLES = {"discovery": "evidence_utility", "structuring": "relation", "answer": "answer", "judge": "judge"}


def prior_completion(role: str, schema: dict | None, counter) -> float:
    """Tokens of the reply a role's prompt asks for, filled in with this request's own ids: one selected candidate
    per window with a short reason (App. J), one parent choice per child (App. K: a child has one parent), a one-
    sentence answer, a bare verdict (App. I). Reasoning models write more (their thinking): measure them (a pilot)."""
    props = (schema or {}).get("properties", {})
    if role == "evidence_utility":
        ids = props.get("selected", {}).get("items", {}).get("properties", {}).get("message_id", {}).get("enum", [])
        items = [{"message_id": i, "label": KEY, "reason": PRIOR_REASON} for i in ids[:PRIOR_KEPT_PER_WINDOW]]
        return counter.count(json.dumps({"selected": items}))
    if role == "relation":
        item = props.get("choices", {}).get("items", {}).get("properties", {})
        child = (item.get("child_id", {}).get("enum") or [""])[0]
        parent = (item.get("parent_id", {}).get("enum") or [""])[-1]
        return counter.count(json.dumps({"choices": [{"child_id": child, "parent_id": parent, "relation": UPDATE,
                                                      "confidence": 0.9, "query_relevance": 0.8}]}))
    if role == "answer":
        return PRIOR_ANSWER_TOKENS + (counter.count(json.dumps({"answer": ""})) if schema else 0)
    return counter.count(json.dumps({"final": PRIOR_JUDGEMENT}) if schema else PRIOR_JUDGEMENT)


def measured_completion(store, role: str, model: str, label: str) -> tuple[float, str] | None:
    """(mean completion tokens per call, where it comes from) of this role's past calls: its replies in the
    response cache (same role and model), else the stages of stored traces run with this role's exact backend
    label (the newest 500); None when there are neither."""
    mean = past_completions(store, role, model)
    if mean is not None:
        return mean, "the mean of its replies in the response cache"
    completion = calls = 0
    for (text,) in store.cursor().execute("SELECT trace_json FROM traces WHERE backend LIKE ? ORDER BY created_at "
                                          "DESC LIMIT 500", [f"%{label}%"]).fetchall():
        for stage in json.loads(text).get("stages", []):
            usage = stage.get("usage") or {}
            if STAGE_ROLES.get(stage.get("name")) == role and str(stage.get("backend", "")).startswith(label):
                completion += usage.get("completion_tokens", 0)
                calls += usage.get("calls", 0) + usage.get("cached_calls", 0)
    return (completion / calls, f"the mean of {calls} calls in stored traces") if calls else None


class NotSent(Exception):
    """A call the estimate counted and did not send (no cached reply): the stand-in answers."""


@dataclass
class Tally:
    """The calls of one stage: how many, how many the cache answers, tokens and where the completion comes from."""

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0  # of the calls to send (cache misses)
    completion_tokens: float = 0.0  # expected, of the calls to send
    completion_tokens_max: int = 0  # output limits of the calls to send
    cached_prompt_tokens: int = 0  # as recorded when the cached replies were made
    cached_completion_tokens: int = 0
    from_standins: int = 0  # calls whose prompt was built on an earlier role's stand-in output
    completion_from_cache: int = 0  # calls to send whose expected completion comes from past replies

    def add(self, other: Tally) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Ledger:
    """Counted calls by (variant, stage); `at(variant, stage, question)` says where the next calls belong, and a
    question whose earlier role was answered by a stand-in marks its later calls as built on stand-ins."""

    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)
    current: tuple[str, str, Any] = ("", "", None)
    tainted: dict = field(default_factory=dict)  # (variant, question key) -> the first stage a stand-in answered
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def at(self, variant: str, stage: str, question_key: Any) -> None:
        self.current = (variant, stage, question_key)

    def count(self, prompt: int, completion: float, limit: int, cached: bool, from_cache: bool) -> None:
        variant, stage, key = self.current
        with self._lock:
            t = self.tallies.setdefault((variant, stage), Tally())
            t.calls += 1
            t.from_standins += self.tainted.get((variant, key), stage) != stage  # a stand-in of an earlier stage
            if cached:
                t.cached_calls += 1
                t.cached_prompt_tokens += prompt
                t.cached_completion_tokens += int(completion)
            else:
                t.prompt_tokens += prompt
                t.completion_tokens += completion
                t.completion_tokens_max += limit
                t.completion_from_cache += from_cache
                self.tainted.setdefault((variant, key), stage)


class CountingClient:
    """A ChatClient's request building and cache key, without the request."""

    def __init__(self, inner, ledger: Ledger, store=None, priors: bool = True):
        self.inner, self.ledger, self.store, self.priors = inner, ledger, store, priors
        self.settings, self.label = inner.settings, inner.label
        self._measured: tuple[float, str] | None | bool = False  # False: not looked up yet

    def expected_completion(self, schema: dict | None) -> tuple[float, bool]:
        """(tokens, measured?): the role's measured mean, else the prior for this request (without priors: the
        output limit, an upper bound), never above the output limit."""
        if self._measured is False:
            self._measured = measured_completion(self.store, self.settings.role, self.settings.model,
                                                 self.label) if self.store is not None else None
        limit = float(self.settings.max_tokens)
        if self._measured is not None:
            return min(self._measured[0], limit), True
        if not self.priors:
            return limit, False
        return min(prior_completion(self.settings.role, schema, self.inner.counter), limit), False

    def complete(self, system: str, user: str, parse, schema: dict | None = None,
                 schema_name: str = "reply") -> tuple[Any, str, Any]:
        params = self.inner.params(schema)
        key, _, _ = request_key(self.settings.model, self.settings.role, system, user, params,
                                self.inner.endpoint.url)
        prompt = chat_prompt_tokens(self.inner.counter, [{"content": system}, {"content": user}])
        row = self.store.cached_response(key) if self.store is not None else None
        if row is not None:
            try:
                value = parse(row[0])
            except Exception:  # noqa: BLE001 - a cached reply that no longer parses is sent again: a miss
                value = row = None
            else:
                self.ledger.count(prompt, row[2] or 0, 0, True, False)
                return value, row[0], Usage(row[1] or 0, row[2] or 0, 0, 1, "cache")
        completion, measured = self.expected_completion(schema)
        self.ledger.count(prompt, completion, self.settings.max_tokens, False, measured)
        raise NotSent(self.settings.role)


@dataclass(frozen=True)
class Calibration:
    """What the model's past replies in the response cache say about the replies to come: the share of a window's
    candidates its evidence-utility replies kept, and how many tokens its answers took. None: no past replies, so
    the stated priors stand in (`priors`; False: the stand-ins' own choices, and each reply at its output limit)."""

    selection_rate: float | None = None
    selection_replies: int = 0
    answer_tokens: float | None = None
    answer_replies: int = 0
    priors: bool = True

    def kept(self, candidates: int) -> int | None:
        """How many of a window's candidates the model is expected to keep (None: as many as the stand-in picks)."""
        if self.selection_rate is not None:
            return round(self.selection_rate * candidates)
        return min(candidates, PRIOR_KEPT_PER_WINDOW) if self.priors else None

    @property
    def answer_length(self) -> float | None:
        """Tokens the model's answers are expected to take (None: the stand-in's own answer)."""
        return self.answer_tokens if self.answer_tokens is not None else PRIOR_ANSWER_TOKENS if self.priors else None

    @classmethod
    def from_cache(cls, store, utility_model: str | None, answer_model: str | None,
                   priors: bool = True) -> Calibration:
        if store is None:
            return cls(priors=priors)
        rate, n = _selection_rate(store, utility_model) if utility_model else (None, 0)
        answers = past_completions(store, "answer", answer_model) if answer_model else None
        count = store.cursor().execute("SELECT count(*) FROM model_responses WHERE role = 'answer' AND model = ?",
                                       [answer_model]).fetchone()[0] if answer_model else 0
        return cls(rate, n, answers, count, priors)


def _selection_rate(store, model: str) -> tuple[float | None, int]:
    """(selected / candidates over the cached evidence-utility replies of `model`, replies counted); the candidates
    are the enum of the request's JSON schema (kept in the cached parameters)."""
    kept = offered = replies = 0
    rows = store.cursor().execute("SELECT response, params FROM model_responses WHERE role = 'evidence_utility' "
                                  "AND model = ? LIMIT 5000", [model]).fetchall()
    for response, params in rows:
        try:
            ids = json.loads(params)["schema"]["properties"]["selected"]["items"]["properties"]["message_id"]["enum"]
            selected = json.loads(_json_part(response)).get("selected", [])
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        kept, offered, replies = kept + min(len(selected), len(ids)), offered + len(ids), replies + 1
    return (kept / offered, replies) if offered else (None, 0)


def _json_part(text: str) -> str:
    start, end = text.find("{"), text.rfind("}")
    return text[start:end + 1] if start >= 0 else text


class EstimatingRole:
    """A language-model role whose calls are counted; where the cache has no reply, its stand-in answers, shaped by
    the calibration where there is one: as many candidates selected as the model's share of them (the stand-in's
    best-scored, more or fewer than it would pick itself), the answer cut or repeated to the model's answer length
    (so the judge's prompt has its size)."""

    offline = False  # structuring keeps it, with the run's offline rule as its stand-in (with_offline_rule)

    def __init__(self, counted, standin, calibration: Calibration = Calibration()):
        self.counted, self.standin, self.calibration = counted, standin, calibration
        self.backend = counted.backend  # the run's label: the estimate reads the run folder's records under it

    def with_offline_rule(self, rule) -> EstimatingRole:
        """This role with the run's offline relation rule as the stand-in for calls the cache cannot answer
        (tmem.models.relation.resolve_relation gives it)."""
        return EstimatingRole(self.counted, rule, self.calibration)

    def _call(self, name: str, *args, **kwargs):
        try:
            return getattr(self.counted, name)(*args, **kwargs), False
        except NotSent:
            return getattr(self.standin, name)(*args, **kwargs), True

    def select(self, question, window_id, candidates, similarities, scope, *args, **kwargs):
        result, standin = self._call("select", question, window_id, candidates, similarities, scope, *args, **kwargs)
        keep = self.calibration.kept(len(candidates))
        if standin and keep is not None:  # as many as the model keeps: the stand-in's best-scored candidates
            scores = self.standin.context_scores(self.standin.relevance(question, candidates, similarities, scope),
                                                 candidates, scope)
            ranked = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))[:keep]
            result = replace(result, selections=tuple(
                Selection(candidates[i].id, window_id, KEY, "estimate: stand-in ranking, the model's share",
                          round(float(scores[i]), 4)) for i in sorted(ranked)))
        return result

    def label_pairs(self, *args, **kwargs):
        return self._call("label_pairs", *args, **kwargs)[0]

    def answer(self, *args, **kwargs):
        result, standin = self._call("answer", *args, **kwargs)
        size = self.calibration.answer_length
        if standin and size is not None and result.text:
            words = result.text.split()
            target = max(1, round(size * 0.75))  # ~0.75 words per token
            result = replace(result, text=" ".join((words * (target // len(words) + 1))[:target]))
        return result

    def judge(self, *args, **kwargs):
        return self._call("judge", *args, **kwargs)[0]


def estimating_roles(roles, ledger: Ledger, store=None, calibration: Calibration = Calibration()):
    """`roles` with every language-model role counted into `ledger` (its stand-in answering cache misses); offline
    roles are kept. An embedder that calls a server is kept too: estimate with a local one to send nothing."""
    wrapped = {}
    for name in ROLES:
        role = getattr(roles, name)
        client = getattr(role, "client", None)
        if getattr(role, "offline", True) or client is None:
            continue
        standin = offline_role(name)  # relation: the run's configured rule, given by resolve_relation per run
        wrapped[name] = EstimatingRole(online_role(name, CountingClient(client, ledger, store, calibration.priors)),
                                       standin, calibration)
    return replace(roles, **wrapped)
