"""Moving a namespace in and out of Redis whole: an export read as of one instant (a consistent
backup while writers run) and an import into an empty namespace."""

from __future__ import annotations

import json
import secrets
from typing import Any

from noveld.schema import stored_json
from noveld.state.base import NamespaceState
from noveld.state.codec import encode_checkpoint
from noveld.state.redis.keys import (
    COMPACTED_SCHEMA,
    IMPORTED_GENERATIONS,
    OUTBOX_ENTRY_EVENTS,
    SCHEMA,
)
from noveld.state.redis.reader import Reader
from noveld.state.redis.reasons import StoreConflict
from noveld.state.redis.story_values import pack_summary


class Transfer(Reader):
    """Export and import a namespace's state."""

    def export(self) -> tuple[NamespaceState, list[dict[str, Any]], dict[str, int]] | None:
        """The state, its undelivered events and uid counters as of one instant — read in the
        same transaction, so a copy taken while writers commit is consistent (a backup needs
        no stop); None if the namespace holds no state."""
        meta = self._meta()
        if "fingerprint" not in meta:
            return None
        self._check_schema(meta)
        state, outbox, uidnext = self._read(self._fingerprint(meta), with_outbox=True)
        return None if state is None else (state, outbox, uidnext)

    def import_state(
        self, state: NamespaceState, outbox: list[dict[str, Any]], uidnext: dict[str, int]
    ) -> None:
        """Write an exported state into this (empty) namespace, in one transaction: the
        statistics become the checkpoint, the log starts empty."""
        k = self.keys
        if self.client.exists(k["meta"], k["ckpt"], k["log"], k["offsets"]):
            raise StoreConflict(
                f"namespace {self.namespace!r} already holds state; import into a new namespace"
            )
        compacted = bool(state.vocab_gone.shape[0])
        meta: dict[str, Any] = {
            "fingerprint": json.dumps(state.fingerprint, sort_keys=True),
            "schema": COMPACTED_SCHEMA if compacted else SCHEMA,
            "vocab_checked": state.vocab_checked,
            "seq": 0,
            "ckpt_seq": 0,
        }
        if compacted:
            # a generation no writer can hold: a replica still running with the word ids of
            # the namespace this one replaces is refused as stale; and a lost vocab_gone key
            # is named at start-up (generation > 0)
            meta["vocab_gen"] = IMPORTED_GENERATIONS + secrets.randbelow(IMPORTED_GENERATIONS)
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(k["meta"], mapping=meta)
        pipe.set(k["ckpt"], encode_checkpoint(state.stats, {"seq": 0, "vocab": len(state.vocab)}))
        for i in range(0, len(state.vocab), 10_000):
            chunk = state.vocab[i : i + 10_000]
            pipe.rpush(k["vocab"], *chunk)
            pipe.hset(k["vocab_idx"], mapping={w: i + j for j, w in enumerate(chunk)})
        if state.vocab_gone.shape[0]:
            pipe.set(k["vocab_gone"], state.vocab_gone.astype("<u8").tobytes())
        if state.offsets:
            pipe.hset(k["offsets"], mapping=state.offsets)
        if state.counters:
            pipe.hset(k["counters"], mapping=state.counters)
        if uidnext:
            pipe.hset(k["uidnext"], mapping=uidnext)
        pipe.set(k["novelty"], json.dumps(state.novelty, separators=(",", ":")))
        numbers: dict[str, bytes] = {}
        texts: dict[str, str] = {}
        for uid, s in state.stories.to_json().items():
            numbers[uid] = pack_summary(s)
            if s["terms"] or s["exemplars"]:
                texts[uid] = json.dumps({"t": s["terms"], "e": s["exemplars"]})
        if numbers:
            pipe.hset(k["stories"], mapping=numbers)
        if texts:
            pipe.hset(k["stories_text"], mapping=texts)
        for i in range(0, len(outbox), OUTBOX_ENTRY_EVENTS):
            part = outbox[i : i + OUTBOX_ENTRY_EVENTS]
            pipe.xadd(k["outbox"], {str(j): stored_json(e) for j, e in enumerate(part)})
        pipe.execute()
