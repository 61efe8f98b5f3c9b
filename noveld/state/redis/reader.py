"""Loading a namespace from Redis: the checkpoint plus the log entries after it, read in one
transaction and checked, so a state whose keys were lost or damaged is refused, the key named."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from noveld.models.dpmm import replay_delta
from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import uncounted_ids
from noveld.state.base import FIRST_RESERVED_SLOT, FingerprintMismatch, NamespaceState
from noveld.state.memory import describe_mismatch
from noveld.state.redis.core import StoreCore
from noveld.state.redis.keys import META_COUNTS, SCHEMA, UID_SLOT_BITS
from noveld.state.redis.reasons import StoreConflict
from noveld.state.redis.values import gone_hashes, stream_entries, text


class Reader(StoreCore):
    """Load, read and check the namespace's state."""

    def has_state(self) -> bool:
        """Whether the namespace exists (its meta key holds a fingerprint)."""
        return bool(self.client.hexists(self.keys["meta"], "fingerprint"))

    def load(self, fingerprint: dict[str, Any]) -> NamespaceState | None:
        """The namespace's state (None if new); refuses an incompatible fingerprint."""
        meta = self._meta()
        wanted = json.dumps(fingerprint, sort_keys=True)
        if "fingerprint" not in meta:
            pipe = self.client.pipeline(transaction=True)
            pipe.hsetnx(self.keys["meta"], "fingerprint", wanted)
            pipe.hsetnx(self.keys["meta"], "schema", SCHEMA)
            pipe.execute()
            meta = self._meta()
        stored = self._fingerprint(meta)
        if stored != fingerprint:
            raise FingerprintMismatch(
                f"namespace {self.namespace!r} in Redis was written with different model "
                f"settings ({describe_mismatch(stored, fingerprint)}); use another --namespace "
                "or the original settings"
            )
        self._check_schema(meta)
        # the uid counter is re-read with the state: after a failover the store may be behind
        # this writer's last commits, and its counter with it
        self._slot = None
        self.stories_in_step = True  # the summaries just read are the stored ones
        return self._read_state(fingerprint)

    def read(self) -> NamespaceState | None:
        """The stored state with its own fingerprint, for inspection (None if absent)."""
        meta = self._meta()
        if "fingerprint" not in meta:
            return None
        self._check_schema(meta)
        return self._read_state(self._fingerprint(meta))

    def log_length(self) -> int:
        """Delta log entries kept (since the checkpoint before last)."""
        return int(self.client.xlen(self.keys["log"]))

    def _meta(self) -> dict[str, str]:
        """The meta hash, once every key of the namespace has its type and meta's counts are
        counts (:class:`StoreConflict` naming the key and what is wrong otherwise; the
        fingerprint is checked as it is read, :meth:`_fingerprint`)."""
        pipe = self._typed_transaction()
        pipe.hgetall(self.keys["meta"])
        (raw,) = self._execute_typed(pipe)
        meta = {self._str("meta", k, "a field name"): v for k, v in raw.items()}
        for name in META_COUNTS:
            if name in meta:
                self._count("meta", name, meta[name])
        return {k: self._str("meta", v, f"field {k!r}") for k, v in meta.items()}

    def _read_state(self, fingerprint: dict[str, Any]) -> NamespaceState | None:
        """Checkpoint + log replay (:meth:`_read`)."""
        return self._read(fingerprint)[0]

    def _read(
        self, fingerprint: dict[str, Any], with_outbox: bool = False
    ) -> tuple[NamespaceState | None, list[dict[str, Any]], dict[str, int]]:
        """Checkpoint + log replay, read in one transaction so a concurrent checkpoint cannot
        trim entries between the two reads; with the uid counters and (``with_outbox``) the
        outbox's events of the same instant. What the keys hold is checked right after the
        fetch, before any of it is used: a key of the wrong type, a count that is not one, JSON
        of the wrong shape, an undecodable checkpoint or log entry is a :class:`StoreConflict`
        naming the key (exit 6), not a traceback."""
        k = self.keys
        pipe = self._typed_transaction()
        pipe.get(k["ckpt"])
        pipe.xrange(k["log"], "-", "+")
        pipe.lrange(k["vocab"], 0, -1)
        pipe.get(k["novelty"])
        pipe.hgetall(k["offsets"])
        pipe.hgetall(k["counters"])
        pipe.hget(k["meta"], "seq")
        pipe.hgetall(k["uidnext"])
        pipe.hmget(k["meta"], ["vocab_gen", "vocab_checked"])
        pipe.get(k["vocab_gone"])
        pipe.hgetall(k["epochs"])  # only checked: claims and commits count on it
        pipe.hgetall(k["stories"])
        pipe.hgetall(k["stories_text"])
        if with_outbox:
            pipe.xrange(k["outbox"], "-", "+")
        (ckpt, log_raw, vocab_raw, novelty_raw, offsets_raw, counters_raw, seq_raw, uidnext_raw,
         (gen_raw, checked_raw), gone, epochs_raw, stories_raw, texts_raw, *rest,
         ) = self._execute_typed(pipe)  # fmt: skip
        seq, gen, checked = (
            0 if raw is None else self._count("meta", name, raw)
            for name, raw in (
                ("seq", seq_raw),
                ("vocab_gen", gen_raw),
                ("vocab_checked", checked_raw),
            )
        )
        offsets = self._counts("offsets", offsets_raw)
        counters = self._counts("counters", counters_raw)
        self._counts("epochs", epochs_raw)
        counters_of = self._uid_counters(uidnext_raw)
        vocab = self._vocabulary(vocab_raw)
        novelty = self._novelty(novelty_raw)
        stories = self._stories(stories_raw, texts_raw)
        outbox: list[dict[str, Any]] = [
            ev
            for sid, fields in (stream_entries(rest[0]) if rest else [])
            for ev in self._stored_events(sid, fields)
        ]
        log = stream_entries(log_raw)
        if ckpt is None and not log and not offsets:
            self.last_seq = 0
            return None, outbox, counters_of
        self.half_life_docs = float(fingerprint.get("half_life_docs", 0.0))
        if ckpt is not None:
            stats, at = self._decoded_checkpoint(ckpt, len(vocab), counters_of)
        else:
            stats, at = MultinomialStats(), 0
        for entry_id, fields in log:
            s = int(text(entry_id).split("-")[0])
            if s <= at:
                continue
            if s != at + 1:
                raise StoreConflict(
                    f"delta log of namespace {self.namespace!r} jumps from {at} to {s}: "
                    "entries are missing (was the log trimmed by hand?)"
                )
            replay_delta(
                stats,
                self._delta(entry_id, fields, len(vocab)),
                self.half_life_docs,
                uncounted=lambda: uncounted_ids(vocab),
            )
            at = s
        if at != seq:
            raise StoreConflict(f"log ends at {at} but meta says {seq}")
        self._check_whole(stats, at, len(vocab), offsets, counters_of)
        if gen > 0 and gone is None:
            raise StoreConflict(
                f"namespace {self.namespace!r} had its vocabulary compacted but keeps no record "
                "of the words that went (its vocab_gone key is gone): the model would count "
                "fewer words than it has seen"
            )
        self.last_seq = at
        self.vocab_gen = gen
        state = NamespaceState(
            fingerprint=fingerprint,
            stats=stats,
            vocab=vocab,
            vocab_gone=gone_hashes(gone, self.namespace),
            vocab_checked=checked,
            novelty=novelty,
            offsets=offsets,
            counters=counters,
            stories=stories,
        )
        return state, outbox, counters_of

    def _lost(self) -> StoreConflict:
        """The namespace's meta (its fingerprint) is gone: flushed, evicted, deleted."""
        return StoreConflict(f"namespace {self.namespace!r} has no meta key any more")

    def emptied(self) -> StoreConflict:
        """The namespace held state before an outage and holds none after it."""
        return StoreConflict(
            f"namespace {self.namespace!r} came back from the outage without any state (a "
            "Redis restarted without persistence, a failover to an empty replica, a flush); "
            "going on would start the model from nothing and re-read only what the input "
            "topic still retains, under event ids already used"
        )

    def unwitnessed(self, group: str, read: dict[str, int]) -> StoreConflict:
        """The namespace has no offsets for a topic the consumer group has read (``read``)."""
        where = ", ".join(f"{key} up to {off}" for key, off in sorted(read.items()))
        return StoreConflict(
            f"namespace {self.namespace!r} has no offsets for its input, but consumer group "
            f"{group!r} has read {where}: the namespace's state was lost (a flush, a Redis "
            "restarted without persistence), or the group served another namespace. Starting "
            "would re-read only what the topic retains, under event ids already used. If this "
            "namespace is meant to start from nothing, pass --accept-empty-state (or use a new "
            "--group)"
        )

    def _check_whole(
        self,
        stats: MultinomialStats,
        at: int,
        vocab_len: int,
        offsets: dict[str, int],
        uidnext: dict[str, int],
    ) -> None:
        """Refuse a state whose parts do not fit together (keys deleted or evicted): committed
        batches without offsets (the input would be read again: counted twice), word ids
        beyond the vocabulary (words mixed up), cluster uids at or beyond their slot's counter
        (uids handed out again)."""
        ns = self.namespace
        if at > 0 and not offsets:
            raise StoreConflict(
                f"namespace {ns!r} has {at} commits but no offsets (its offsets key is gone)"
            )
        words = np.flatnonzero(stats.head >= 0)
        if words.shape[0] and int(words[-1]) >= vocab_len:
            raise StoreConflict(
                f"namespace {ns!r} counts word ids up to {int(words[-1])} but its vocabulary "
                f"holds {vocab_len} words (its vocab key is gone or cut)"
            )
        counters = {int(s): v for s, v in uidnext.items()}
        uids = stats.uid[stats.active_slots()]
        slots, counts = uids >> UID_SLOT_BITS, uids & ((1 << UID_SLOT_BITS) - 1)
        for slot in np.unique(slots[slots < FIRST_RESERVED_SLOT]).tolist():
            top = int(counts[slots == slot].max())
            if top >= counters.get(int(slot), 0):
                raise StoreConflict(
                    f"namespace {ns!r} has cluster uid counter {top} in slot {slot} but the "
                    f"slot's next counter is {counters.get(int(slot), 0)} (its uidnext key is "
                    "gone)"
                )
