"""Loading the explorer's libraries while its server starts, so the first screen does not wait for them.

`python -m tmem app` (what `make run` runs) starts a background thread that imports the modules the first screen
needs and loads the BPE ranks, then hands over to `streamlit run app.py`; app.py calls `wait()` before it imports
the library. Waiting, not importing side by side, matters: two threads importing the same packages at once can meet
a circular import half-way (Python then hands one of them a partially initialised module). Under plain
`streamlit run app.py` nothing was started and `wait()` returns at once.
"""
from __future__ import annotations

import gc
import importlib
import threading
from collections.abc import Callable, Iterable

_done = threading.Event()
_started: list[bool] = []  # start() ran (at most once per process)


def start(modules: Iterable[str], then: Callable[[], object] | None = None) -> None:
    """Import `modules` (by name, in order) and run `then` in a daemon thread; once per process."""
    if _started:
        return
    _started.append(True)
    names = tuple(modules)

    def work() -> None:
        try:
            for name in names:
                try:
                    importlib.import_module(name)
                except Exception:  # noqa: BLE001 - a warm-up only: the app imports it again and reports any error
                    pass
            if then is not None:
                try:
                    then()
                except Exception:  # noqa: BLE001 - same: the first real use raises it where it is handled
                    pass
            # The library's objects live as long as the server: moved out of the cyclic collector's reach, a full
            # collection no longer walks them all again during a page's visit (0.38 of Failures' 1.04 s of CPU
            # on its first visit to the demo batch went to collections; frozen, 0.04 s). Only cycles made at
            # import time are never collected.
            gc.collect()
            gc.freeze()
        finally:
            _done.set()

    threading.Thread(target=work, name="tmem-warmup", daemon=True).start()


def wait(timeout: float = 120.0) -> None:
    """Block until the warm-up (if one was started) is done."""
    if _started:
        _done.wait(timeout)


def pending() -> bool:
    """A warm-up was started and is still loading."""
    return bool(_started) and not _done.is_set()
