"""How long a call to the local llama.cpp server may take: the server's speed, measured once at start with a tiny
request and followed after every reply, and each call's timeout from its prompt length, with a floor and a cap.

Why not one fixed timeout: the same ~4,000-token answer prompt takes ~45 s on two idle cores and 5-10 minutes on
two cores shared with other work (docs/backends.md). A fixed timeout is either too short on a busy machine (the call
fails and its fallback answers: a child becomes a root) or far too long when the server has died. Here a call may
take MARGIN times what the measured speed predicts for its prompt and its whole output limit (a small model may
write to its limit), never less than the floor and never more than the cap. The speed follows the server: each
reply's own timings (llama.cpp's `timings`, else the wall clock against the prediction) update it, and a call that
still times out halves it, so the retry waits twice as long.
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

MARGIN = 3.0  # a call may take 3x the prediction: the load of a shared machine moves by that much within minutes
SMOOTHING = 0.5  # weight of the newest observation (in log space: a 2x slower reply halves the speed's distance)
PROBE = "Count from one to twelve in words, separated by spaces."
PROBE_TOKENS = 24  # the probe's output limit: enough reply tokens to time the generation


@dataclass(frozen=True)
class Pace:
    """Tokens per second the server reads a prompt at and writes a reply at, and where the figures come from."""

    prompt_per_s: float
    reply_per_s: float
    source: str  # "measured at start", "followed from the last reply", ...

    def slower(self, factor: float, source: str) -> Pace:
        return Pace(self.prompt_per_s / factor, self.reply_per_s / factor, source)


@dataclass(frozen=True)
class CallTimeout:
    seconds: float
    why: str  # how it was set, for the error line of a call that still timed out


def call_timeout(pace: Pace, prompt_tokens: int, max_tokens: int, floor: float, cap: float) -> CallTimeout:
    """MARGIN x (prompt at the reading speed + the whole output limit at the writing speed), within [floor, cap]."""
    predicted = MARGIN * (prompt_tokens / pace.prompt_per_s + max_tokens / pace.reply_per_s)
    seconds = min(cap, max(floor, predicted))
    bound = f"; raised to the floor, {floor:g} s" if seconds > predicted else \
        f"; cut to the cap, {cap:g} s" if seconds < predicted else ""
    return CallTimeout(seconds, f"{MARGIN:g} x ({prompt_tokens:,} prompt tokens at {pace.prompt_per_s:.1f}/s + up to "
                                f"{max_tokens:,} reply tokens at {pace.reply_per_s:.1f}/s, {pace.source}){bound}")


def _blend(old: float, new: float) -> float:
    return math.exp((1 - SMOOTHING) * math.log(old) + SMOOTHING * math.log(new))


class ServerPace:
    """The pace of one server, shared by the roles on it (thread-safe): timeouts from it, replies update it."""

    def __init__(self, pace: Pace | None, floor: float, cap: float):
        self.pace, self.floor, self.cap = pace, floor, cap
        self._lock = threading.Lock()

    def timeout(self, prompt_tokens: int, max_tokens: int) -> CallTimeout:
        with self._lock:
            pace = self.pace
        if pace is None:  # the start measurement failed: nothing to scale from
            return CallTimeout(self.cap, "the cap: the server's speed could not be measured")
        return call_timeout(pace, prompt_tokens, max_tokens, self.floor, self.cap)

    def observe(self, response, prompt_tokens: int, max_tokens: int, seconds: float) -> None:
        """Follow the server after a reply: its own timings when it reports them (llama.cpp), else the wall clock
        against what the pace predicted for the tokens it read and wrote."""
        measured = reply_pace(response, "followed from the last reply")
        with self._lock:
            old = self.pace
            if old is None:
                self.pace = measured
                return
            if measured is None:
                usage = getattr(response, "usage", None)
                written = getattr(usage, "completion_tokens", None) or 0
                predicted = prompt_tokens / old.prompt_per_s + written / old.reply_per_s
                if predicted <= 0 or seconds <= 0:
                    return
                measured = old.slower(seconds / predicted, "followed from the last reply's wall clock")
            self.pace = Pace(_blend(old.prompt_per_s, measured.prompt_per_s),
                             _blend(old.reply_per_s, measured.reply_per_s), measured.source)

    def timed_out(self) -> None:
        """A call ran past its timeout: the server is at least twice as slow as thought."""
        with self._lock:
            if self.pace is not None:
                self.pace = self.pace.slower(2.0, "halved after a timeout")


def reply_pace(response, source: str) -> Pace | None:
    """llama.cpp's `timings` of one reply as a Pace; None when the server reports none or too few tokens to tell
    (a prompt read from the prefix cache has no reading speed worth the name)."""
    timings = (getattr(response, "model_extra", None) or {}).get("timings") or {}
    try:
        prompt_n, read = int(timings.get("prompt_n", 0)), float(timings.get("prompt_per_second") or 0)
        reply_n, write = int(timings.get("predicted_n", 0)), float(timings.get("predicted_per_second") or 0)
    except (TypeError, ValueError):
        return None
    if prompt_n < 8 or reply_n < 4 or read <= 0 or write <= 0:
        return None
    return Pace(read, write, source)


def measure_pace(client, model: str, timeout: float) -> Pace:
    """One tiny request (a short prompt, PROBE_TOKENS to write, the prefix cache off so the prompt is read): the
    server's timings, else the wall clock over both (slower than the truth: each rate gets the whole time)."""
    started = time.perf_counter()
    response = client.chat.completions.create(model=model, max_tokens=PROBE_TOKENS, temperature=0,
                                              messages=[{"role": "user", "content": PROBE}],
                                              extra_body={"cache_prompt": False}, timeout=timeout)
    seconds = max(time.perf_counter() - started, 1e-3)
    measured = reply_pace(response, "measured at start")
    if measured is not None:
        return measured
    usage = getattr(response, "usage", None)
    read = max(getattr(usage, "prompt_tokens", 0) or 0, 1)
    written = max(getattr(usage, "completion_tokens", 0) or 0, 1)
    return Pace(read / seconds, written / seconds, "measured at start (wall clock)")


_PACES: dict[Hashable, ServerPace] = {}
_LOCK = threading.Lock()


def server_pace(key: Hashable, client, model: str, floor: float, cap: float,
                log: Callable[[str], None] = lambda line: None) -> ServerPace:
    """The pace of the server `key` names (its options), measured once per process with `client`; a server that
    does not answer the probe gets timeouts at the cap, and the line says so."""
    with _LOCK:
        if key in _PACES:
            return _PACES[key]
        try:
            pace = measure_pace(client, model, cap)
            log(f"local model: {pace.prompt_per_s:.1f} prompt tokens/s read, {pace.reply_per_s:.1f} reply tokens/s "
                f"written ({pace.source}); each call's timeout: {MARGIN:g}x its prediction, {floor:g}-{cap:g} s")
        except Exception as exc:  # noqa: BLE001 - any failure of the probe: the calls still run, at the cap
            pace = None
            log(f"local model: the speed probe failed ({type(exc).__name__}); each call's timeout is the cap, "
                f"{cap:g} s")
        _PACES[key] = ServerPace(pace, floor, cap)
        return _PACES[key]
