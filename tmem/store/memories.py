"""The memories the App. B systems built (tmem.baselines): one row per (corpus, scope, system, key), the key naming
the system's configuration, prompts and models; the memory as JSON and its construction usage per stage (Table 6).
A row is written once the memory is complete; an ingestion killed before that resumes from the response cache.
"""
from __future__ import annotations

import json
from datetime import datetime

MEMORY_SCHEMA = """
CREATE TABLE IF NOT EXISTS system_memories (  -- tmem.baselines.ingestion; dropped by a re-import of the corpus
    corpus VARCHAR NOT NULL, scope VARCHAR NOT NULL, system VARCHAR NOT NULL, key VARCHAR NOT NULL,
    memory_json VARCHAR NOT NULL, usage_json VARCHAR NOT NULL, seconds DOUBLE, created_at TIMESTAMP,
    PRIMARY KEY (corpus, scope, system, key));
"""


class MemoryTables:
    """Store methods for built memories (`self` is a tmem.store.Store)."""

    def system_memory(self, corpus: str, scope: str, system: str, key: str) -> tuple[dict, dict, float] | None:
        """(memory, usage per stage, seconds) of a memory built before, or None."""
        row = self.cursor().execute("SELECT memory_json, usage_json, seconds FROM system_memories WHERE corpus = ? "
                                    "AND scope = ? AND system = ? AND key = ?", [corpus, scope, system, key]).fetchone()
        return (json.loads(row[0]), json.loads(row[1]), row[2] or 0.0) if row else None

    def save_system_memory(self, corpus: str, scope: str, system: str, key: str, memory: dict, usage: dict,
                           seconds: float) -> None:
        with self._write_lock:
            self.cursor().execute("INSERT OR REPLACE INTO system_memories VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                                  [corpus, scope, system, key, json.dumps(memory), json.dumps(usage), seconds,
                                   datetime.now().replace(microsecond=0)])

    def system_memories(self, corpus: str) -> list[dict]:
        """Every memory built for a corpus: scope, system, key, usage per stage, seconds (no memory data)."""
        rows = self.cursor().execute("SELECT scope, system, key, usage_json, seconds, created_at FROM system_memories "
                                     "WHERE corpus = ? ORDER BY system, scope", [corpus]).fetchall()
        return [{"scope": r[0], "system": r[1], "key": r[2], "usage": json.loads(r[3]), "seconds": r[4],
                 "created_at": r[5]} for r in rows]
