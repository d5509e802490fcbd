"""The four model roles (evidence utility, relation, answer, judge) and the embedder, behind one small interface.

`base` defines the protocols and result records; `offline` holds the deterministic defaults that need no network.
Other backends (an OpenAI-compatible endpoint, packaged embedders) plug in by implementing the same protocols.
"""
