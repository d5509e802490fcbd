"""Messages held as an Arrow table: the bulk form of a corpus between an importer and `Store.replace_corpus`.

A million `Message` objects cost about a gigabyte and seconds to build, only to be taken apart again into columns
for DuckDB. `MessageColumns` keeps typed columns instead (strings as UTF-8 bytes, no Python object per value) and
is still a `Sequence[Message]`: indexing or iterating builds the `Message` on the spot, so every reader of
`CorpusData.messages` works unchanged. `arrow_messages` turns either form into the table the store loads in one
statement.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import fields

import pyarrow as pa
import pyarrow.compute as pc

from tmem.types import Message

FIELDS = tuple(f.name for f in fields(Message))  # id, scope, text, timestamp, author, ..., reply_to
_TYPES = {"timestamp": pa.timestamp("us"), "stage": pa.int32(), "phase_order": pa.int32(),
          "phase_progress": pa.float64()}  # every other field is a string
SCHEMA = pa.schema([(name, _TYPES.get(name, pa.string())) for name in FIELDS])
_BATCH = 16_384  # messages turned into Python objects at a time when iterating


class MessageColumns(Sequence[Message]):
    """Messages as an Arrow table with the `Message` fields as columns (`SCHEMA`), in corpus order."""

    __hash__ = None  # equality is by content

    def __init__(self, table: pa.Table):
        self.table = table.select(list(FIELDS)).cast(SCHEMA)

    @classmethod
    def from_rows(cls, rows: Sequence[tuple]) -> MessageColumns:
        """From tuples in `FIELDS` order."""
        columns = list(zip(*rows)) if rows else [() for _ in FIELDS]
        return cls(pa.table([pa.array(c, t) for c, t in zip(columns, SCHEMA.types)], schema=SCHEMA))

    @classmethod
    def from_messages(cls, messages: Sequence[Message]) -> MessageColumns:
        if isinstance(messages, MessageColumns):
            return messages
        return cls.from_rows([tuple(getattr(m, name) for name in FIELDS) for m in messages])

    def column(self, name: str) -> list:
        return self.table.column(name).to_pylist()

    def longer_than(self, name: str, limit: int) -> list[int]:
        """Positions of the messages whose string field `name` has more than `limit` characters."""
        return pc.indices_nonzero(pc.greater(pc.utf8_length(self.table.column(name)), limit)).to_pylist()

    def replace_column(self, name: str, values: list) -> MessageColumns:
        index = FIELDS.index(name)
        return MessageColumns(self.table.set_column(index, SCHEMA.field(index), pa.array(values, SCHEMA.types[index])))

    def __len__(self) -> int:
        return self.table.num_rows

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError("message index out of range")
        return Message(**self.table.slice(index, 1).to_pylist()[0])

    def __iter__(self) -> Iterator[Message]:
        for batch in self.table.to_batches(max_chunksize=_BATCH):
            for row in batch.to_pylist():
                yield Message(**row)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __repr__(self) -> str:
        return f"MessageColumns({len(self):,} messages)"


def arrow_messages(corpus: str, messages: Sequence[Message]) -> pa.Table:
    """The rows of the `messages` table for `corpus`: corpus, scope, seq (corpus order), then every field."""
    table = MessageColumns.from_messages(messages).table
    n = table.num_rows
    return (table.add_column(0, "corpus", pa.repeat(pa.scalar(corpus, pa.string()), n))
            .add_column(2, "seq", pa.array(range(n), pa.int32())))


_SHARED = tuple(name in ("author", "role", "channel", "topic", "phase") for name in FIELDS[4:])


def messages_from_rows(result, batch: int = 8192) -> list[Message]:
    """Messages from a query result of (scope, id, text, timestamp, author, ..., reply_to) rows, fetched `batch`
    at a time (not all rows as tuples first), with one string object per distinct scope and metadata value: a
    250,000-message scope repeats a few dozen of them (its messages: ~175 -> ~100 MB; the fetch: +225 -> +15 MB)."""
    share, kept, out = {}.setdefault, _SHARED, []
    while rows := result.fetchmany(batch):
        out += [Message(r[1], share(r[0], r[0]), r[2], r[3], *(share(v, v) if kept[i] and v else v
                                                               for i, v in enumerate(r[4:]))) for r in rows]
    return out
