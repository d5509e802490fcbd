"""tmem.warmup (what `python -m tmem app` starts): modules imported and the follow-up run in the background, once
per process; `wait()` blocks until then, and returns at once when nothing was started (plain `streamlit run`)."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.integration
def test_start_imports_runs_the_follow_up_once_and_wait_blocks_until_done():
    code = textwrap.dedent("""
        import sys, time
        from tmem import warmup
        began = time.perf_counter(); warmup.wait(); assert time.perf_counter() - began < 0.5  # nothing started
        assert not warmup.pending() and "colorsys" not in sys.modules
        calls = []
        warmup.start(["colorsys", "no_such_module_xyz"], then=lambda: (time.sleep(0.3), calls.append(1)))
        warmup.start(["json"], then=lambda: calls.append(2))  # a second start is ignored
        assert warmup.pending()
        warmup.wait()
        assert not warmup.pending() and "colorsys" in sys.modules and calls == [1], calls
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


@pytest.mark.integration
def test_the_warmed_library_is_kept_out_of_the_collectors_full_passes():
    """After the warm-up the objects loaded so far are frozen (gc.freeze): a page's full collection walked all of them
    again (0.38 of Failures' 1.04 s of CPU on a first visit). Cycles made afterwards are still collected."""
    code = textwrap.dedent("""
        import gc, weakref
        from tmem import warmup
        before = gc.get_freeze_count()
        warmup.start(["colorsys"])
        warmup.wait()
        assert before == 0 and gc.get_freeze_count() > 1000, (before, gc.get_freeze_count())
        class Node: pass
        a, b = Node(), Node(); a.other, b.other = b, a  # a cycle made after the freeze
        gone = weakref.ref(a); del a, b
        gc.collect()
        assert gone() is None
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
