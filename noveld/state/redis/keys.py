"""The key layout of a namespace in Redis, and the numbers that describe it.

Every key of a namespace lives under the prefix ``noveld:{ns}:`` (the hash tag ``{ns}`` keeps them
in one cluster slot, so one Lua script commits a batch atomically):

- ``meta`` — fingerprint, schema, ``seq`` (last log entry), ``ckpt_seq``, ``vocab_gen``,
  ``vocab_checked``
- ``log`` — stream of packed ``StatsDelta`` (entry id ``<seq>-1``, fields ``w`` writer, ``d``)
- ``ckpt`` — the statistics as of ``ckpt_seq`` (see :mod:`noveld.state.codec`)
- ``vocab`` / ``vocab_idx`` — word list (id = index) and word → id; ``vocab_gone`` — hashes of
  the words a compaction took out
- ``offsets``, ``epochs`` — next offset and fencing epoch per ``topic:partition``
- ``uidnext`` — next cluster counter per uid slot; ``counters``; ``novelty`` (JSON);
  ``lifecycle`` — announced cluster id → its last event (``born``/``retired``/``merged``), so a
  cluster confirmed by two replicas is announced, and ended, once; and each ``cluster.merged``
  event id → ``merged``, so a merge two replicas decided is announced once
- ``outbox`` — stream of committed, undelivered events: one entry per commit, fields ``"0"``,
  ``"1"``, … each an event's JSON (:func:`noveld.schema.event_json`), at most
  :data:`OUTBOX_ENTRY_EVENTS` per entry (entries of one field pair ``id``/``event`` per event,
  written by earlier versions, are read too)
- ``stories`` / ``stories_text`` — cluster uid → a story summary's numbers (packed: born, last,
  docs, width, head as little-endian doubles, then the counts as uint32;
  :mod:`noveld.state.redis.story_values`) / its text (JSON ``{"t": top terms, "e":
  exemplars}``, where it has some): :mod:`noveld.models.stories`, committed with each batch
- ``lease`` — the single writer's lease (svi); ``ack`` and ``probe`` — markers, not state
"""

from __future__ import annotations

from noveld.models.lineage import UID_SLOT_BITS as LINEAGE_SLOT_BITS

SCHEMA = 2
#: the schema of a namespace whose vocabulary was compacted: the same keys plus ``vocab_gone``
#: and ``meta.vocab_gen``, which a noveld reading only schema 2 would ignore (a smaller V, no
#: generation check), so it refuses the namespace instead
COMPACTED_SCHEMA = 3
#: an imported compacted namespace starts at a random vocabulary generation in
#: [2^32, 2^33): far above what compactions reach, below 2^53 (Lua's numbers are doubles)
IMPORTED_GENERATIONS = 1 << 32
#: events per outbox entry at most (a commit of more writes several; bounds a Lua call's stack)
OUTBOX_ENTRY_EVENTS = 1000
UID_SLOT_BITS = LINEAGE_SLOT_BITS  # uid = slot << 40 | counter; partition 0's: plain counters
CHECKPOINT_EVERY = 200  # log entries between checkpoints

#: the Redis type of each key of a namespace that exists (``ack`` and ``probe`` are overwritten
#: by SET whatever they hold; the staging keys are their writer's): one of another type is damage
KEY_TYPES = {
    "meta": "hash",
    "counters": "hash",
    "offsets": "hash",
    "epochs": "hash",
    "outbox": "stream",
    "log": "stream",
    "uidnext": "hash",
    "novelty": "string",
    "lifecycle": "hash",
    "vocab": "list",
    "vocab_idx": "hash",
    "vocab_gone": "string",
    "ckpt": "string",
    "stories": "hash",
    "stories_text": "hash",
}
#: every key of a namespace by name (the typed state plus the markers and the lease)
KEY_NAMES = (*KEY_TYPES, "ack", "probe", "lease")
#: meta's fields that hold a non-negative integer
META_COUNTS = ("schema", "seq", "ckpt_seq", "vocab_gen", "vocab_checked")


def key_prefix(namespace: str) -> str:
    """What every key of the namespace begins with (its hash tag is the namespace)."""
    return f"noveld:{{{namespace}}}:"


def namespace_keys(namespace: str) -> dict[str, str]:
    """The full name of each of the namespace's keys (:data:`KEY_NAMES`)."""
    prefix = key_prefix(namespace)
    return {n: prefix + n for n in KEY_NAMES}


def staging_keys(namespace: str, writer: str) -> tuple[str, str]:
    """A writer's own keys for a compaction's new word list and index (writers compacting at
    once must not append to one list)."""
    prefix = key_prefix(namespace)
    return f"{prefix}vocab_next:{writer}", f"{prefix}vocab_idx_next:{writer}"


def uid_slot(partition_keys: list[str]) -> int:
    """The uid slot of a batch: the lowest partition number among its inputs."""
    parts = [int(k.rsplit(":", 1)[1]) for k in partition_keys if k.rsplit(":", 1)[-1].isdigit()]
    return min(parts, default=0)
