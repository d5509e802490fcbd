"""The demo's shipped vectors: the MiniLM vectors of every demo message (every scope) and of every demo question's
query, so a fresh database embeds nothing for the demo and never loads the ONNX session: not the explorer's first
answer (~4 s of CPU on the shared two-core machine), not the demo batch a first start runs in the background, not
the tests that run either on a fresh database.

`data/demo-vectors.npz` holds the embedder's exact name, per message its scope, id and the hash of the text its
vector was computed from, float32 vectors (exactly what the pipeline stores; float16 would change the in-window
ranking's near-ties, and a recorded demo replays the float32 ones), and the queries' hashes and vectors.
`install_demo_vectors` copies them into a store's vector cache for that embedder when the demo is loaded. A vector
is used only while its text hash matches the message (tmem.models.embedders.VectorStore re-embeds a changed text),
and only by that embedder: with the lexical fallback or an OpenAI-compatible embedder the file is not used. `python
-m tmem demo --vectors` regenerates it (tmem/commands/corpus/demo.py); tests/test_demo_vectors.py fails when it no
longer covers the shipped demo.
"""
from __future__ import annotations

import warnings
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tmem.models.embedders import MiniLMEmbedder, minilm_files

DEMO_VECTORS = Path(__file__).resolve().parent.parent.parent / "data" / "demo-vectors.npz"
REGENERATE = "python -m tmem demo --vectors"


@dataclass(frozen=True)
class DemoVectors:
    """What the file holds: one row of `vectors` per message (its scope, id and the hash of the text it embeds),
    one row of `query_vectors` per query text hash."""
    embedder: str
    scopes: tuple[str, ...]
    ids: tuple[str, ...]
    hashes: tuple[str, ...]
    vectors: np.ndarray
    query_hashes: tuple[str, ...]
    query_vectors: np.ndarray

    def scope_rows(self, scope: str) -> list[tuple[str, str, bytes]]:
        """(message id, text hash, float32 bytes) of one scope's messages: a store's message-vector rows."""
        return [(i, h, v.tobytes()) for s, i, h, v in zip(self.scopes, self.ids, self.hashes, self.vectors)
                if s == scope]


def save_demo_vectors(data: DemoVectors, path: Path = DEMO_VECTORS) -> int:
    """Write `data` (compressed npz, no pickles); returns the file's size in bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        np.savez_compressed(handle, embedder=np.array(data.embedder), scopes=np.array(data.scopes),
                            ids=np.array(data.ids), hashes=np.array(data.hashes),
                            vectors=data.vectors.astype(np.float32), query_hashes=np.array(data.query_hashes),
                            query_vectors=data.query_vectors.astype(np.float32))
    return path.stat().st_size


def load_demo_vectors(path: Path = DEMO_VECTORS) -> DemoVectors:
    """The file's contents; ValueError naming the file and field when it is malformed."""
    try:
        with np.load(path, allow_pickle=False) as f:
            data = DemoVectors(str(f["embedder"]), tuple(map(str, f["scopes"])), tuple(map(str, f["ids"])),
                               tuple(map(str, f["hashes"])), np.asarray(f["vectors"], np.float32),
                               tuple(map(str, f["query_hashes"])), np.asarray(f["query_vectors"], np.float32))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{path}: not a demo vectors file ({type(exc).__name__}: {exc}); regenerate it with "
                         f"{REGENERATE}") from None
    rows = data.vectors.shape[0]
    if not rows == len(data.ids) == len(data.hashes) == len(data.scopes) or \
            data.query_vectors.shape[0] != len(data.query_hashes):
        raise ValueError(f"{path}: field 'vectors': {rows} rows for {len(data.ids)} ids; regenerate it with "
                         f"{REGENERATE}")
    return data


def install_demo_vectors(store, corpus: str, path: Path = DEMO_VECTORS) -> int:
    """Copy the shipped vectors into `store`'s vector cache (message and query vectors of their embedder); the
    number of message vectors installed. 0 when the file is absent or MiniLM is not installed (the lexical
    fallback computes its own); a malformed file is a warning, and the vectors are then computed as usual."""
    if not path.exists() or minilm_files() is None:
        return 0
    try:
        data = load_demo_vectors(path)
    except ValueError as exc:
        warnings.warn(str(exc), stacklevel=2)
        return 0
    if data.embedder != MiniLMEmbedder.name:  # vectors of another embedder must never be read as MiniLM's
        return 0
    for scope in dict.fromkeys(data.scopes):
        store.save_message_vectors(corpus, scope, data.embedder, data.scope_rows(scope))
    store.save_query_vectors(data.embedder, [(h, v.tobytes()) for h, v in zip(data.query_hashes,
                                                                              data.query_vectors)])
    return len(data.ids)
