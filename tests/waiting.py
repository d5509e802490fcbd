"""Waiting in tests: poll a state, never sleep a guessed time, and never assert how long something took.

A test that waits for a background process, a server or a job polls its state with `wait_until`, whose one
timeout is generous on an idle machine (WAIT_S) and scales with TMEM_TEST_SLOW on a busy one (`make
test-under-load` sets 4): a slow machine makes a test slower, never red. A timeout handed to something else (a
client's per-request timeout, a barrier, a child's own deadline) is `scaled(seconds)`. The factor is read when
this module is imported, before tests/conftest.py clears the TMEM_* settings for the tests themselves.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

# How much slower than an idle 2-core machine this one may be (TMEM_TEST_SLOW=4 under `make test-under-load`).
SLOW = max(1.0, float(os.environ.get("TMEM_TEST_SLOW") or 1))
# The one timeout of every wait: far above what any awaited state takes on an idle machine (the slowest, a
# background batch of the demo, takes ~60 s), so reaching it means the state never came, not that it came late.
WAIT_S = 300 * SLOW


def scaled(seconds: float) -> float:
    """A timeout handed to a child or a client (a subprocess, an HTTP call), stretched like WAIT_S."""
    return seconds * SLOW


def wait_until(reached: Callable[[], object], what: str, timeout: float = WAIT_S, every: float = 0.05,
               alive: Callable[[], bool] | None = None):
    """Poll `reached()` until it returns something truthy (returned), `alive()` turns false (then one last poll),
    or `timeout` passes; then fail naming `what` was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = reached()
        if value:
            return value
        if (alive is not None and not alive()) or time.monotonic() > deadline:
            value = reached()
            if value:
                return value
            raise AssertionError(f"waited {timeout:.0f} s for {what} (TMEM_TEST_SLOW={SLOW:g}); it never came")
        time.sleep(every)


def finishes(call: Callable[[], object], what: str, timeout: float = WAIT_S):
    """`call()`'s value, run on a thread: "nothing hangs" as a state (it finished), not as a guessed duration."""
    out: dict[str, object] = {}

    def run() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - re-raised on the test's thread
            out["error"] = exc

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise AssertionError(f"{what} did not finish in {timeout:.0f} s (TMEM_TEST_SLOW={SLOW:g}): it hangs")
    if "error" in out:
        raise out["error"]
    return out["value"]
