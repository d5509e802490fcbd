"""T-Mem: temporal evidence forests for long-horizon multi-party conversational memory.

The library's front door is `tmem.api` (open a store and a scope, run and store a question, find a trace); the
pipeline for one question is `tmem.pipeline.run.run_question`; the command line is `tmem` (or `python -m tmem`).
"""
__version__ = "0.1.0"
