"""`python -m tmem app`: serve the explorer (what `make run` runs) — `streamlit run app.py`, with the libraries its
first screen needs loaded in the background while the server starts (tmem.warmup), instead of in the first
browser session. Arguments after `--` go to streamlit unchanged (e.g. `-- --server.port 8600`)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from streamlit.web import cli as streamlit_cli

import tmem.viz.navigation  # noqa: F401 - app.py draws its navigation from it before it waits for the warm-up
from tmem import warmup
from tmem.models.llm.tokens import default_token_counter  # small, not tmem.api: the library loads in the warm-up

APP = Path(__file__).resolve().parents[2] / "app.py"
# What the first screen (the demo's curated question with its answers, funnel and timeline) imports, heaviest
# first; measured with `python -X importtime` and py-spy on a fresh server (docs/app.md, "First screen").
# (Only modules: a page file such as pages/question.py is a script streamlit runs, never imported.)
FIRST_SCREEN_MODULES = ("streamlit.emojis", "pages._shell", "pages._runs", "tmem.evaluation.batch.jobs",
                        "plotly.graph_objects")


def load_token_ranks() -> None:
    """The BPE ranks of the evidence budget's token counter (0.5-0.7 s of pure Python on the first count; the
    encoding is cached process-wide, so the pipeline's own counter finds it loaded)."""
    default_token_counter().count("warm-up")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("streamlit_args", nargs=argparse.REMAINDER,
                        help="passed to `streamlit run app.py` (after `--`), e.g. -- --server.port 8600")


def main(args: argparse.Namespace) -> int:
    if not APP.exists():
        raise OSError(f"{APP}: the explorer's app.py is not next to the tmem package (run from a source checkout)")
    extra = [a for a in args.streamlit_args if a != "--"]
    sys.path.insert(0, str(APP.parent))  # pages/ is importable for the warm-up, as streamlit makes it for app.py
    warmup.start(FIRST_SCREEN_MODULES, then=load_token_ranks)
    streamlit_cli.main(args=["run", str(APP), *extra], prog_name="streamlit", standalone_mode=False)
    return 0
