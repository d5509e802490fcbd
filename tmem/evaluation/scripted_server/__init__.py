"""A scripted OpenAI-compatible server for measuring the model clients with no model behind them (server.py), its
Batch API (batches.py) and its replies and token tallies (replies.py); the measurement scripts and the tests import
it from here.
"""
from tmem.evaluation.scripted_server.replies import TokenTally, completion, counted_usage, scripted_reply
from tmem.evaluation.scripted_server.server import Behaviour, FaultServer, scripted_settings

__all__ = ["Behaviour", "FaultServer", "TokenTally", "completion", "counted_usage", "scripted_reply",
           "scripted_settings"]
