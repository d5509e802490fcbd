"""The memory systems the paper compares T-Mem with (App. B, C.2; Table 1, Table 6), and the oracle bound, behind
one contract (tmem.baselines.base.System): ingest a scope once (tmem.baselines.ingestion: cached per scope,
configuration and models, resumable, its construction tokens counted per stage), then return for a question the
system's own context, rendered under the shared 8,192-token cap and answered and judged by T-Mem's roles
(tmem.baselines.stage). They run as variants: `run --variants full,hipporag2,structmem,...`.

Each system is an adaptation that follows App. B's stated configuration and says so in its label ("adaptation of
..."), or a published package; docs/baselines.md says which and why.
"""
from __future__ import annotations

from tmem.baselines.amem import AMem
from tmem.baselines.base import System
from tmem.baselines.graphiti import Graphiti
from tmem.baselines.hindsight import Hindsight
from tmem.baselines.hipporag2 import HippoRAG2
from tmem.baselines.mem0 import Mem0
from tmem.baselines.memgas import MemGAS
from tmem.baselines.oracle import OracleEvidence
from tmem.baselines.structmem import StructMem

# Table 1's order: A-Mem, HippoRAG2, Hindsight, StructMem, MemGAS; the packaged Mem0 and Graphiti
# (requirements-baselines.txt); then the oracle bound
SYSTEMS: dict[str, System] = {s.name: s for s in (AMem(), HippoRAG2(), Hindsight(), StructMem(), MemGAS(), Mem0(),
                                                  Graphiti(), OracleEvidence())}
