"""The commit path: one atomic Lua call per batch (fencing, offsets, uid slot, log entry,
counters, outbox), then the entries other writers appended meanwhile, and periodic checkpoints."""

from __future__ import annotations

import json
from typing import Any

import redis

from noveld.models.dpmm import replay_delta
from noveld.models.kernels import multinomial as kern
from noveld.models.novelty import seated_by_cluster
from noveld.models.vocabulary import uncounted_ids
from noveld.schema import event_json
from noveld.state.base import (
    CommitOutcome,
    CommitRequest,
    CommitResult,
    NamespaceState,
    StaleVocabulary,
    births_among,
)
from noveld.state.codec import encode_checkpoint, encode_delta
from noveld.state.redis.keys import OUTBOX_ENTRY_EVENTS, UID_SLOT_BITS, uid_slot
from noveld.state.redis.reasons import StoreConflict, lease_refusal
from noveld.state.redis.story_values import folded, pack_change
from noveld.state.redis.values import text
from noveld.state.redis.vocabulary import Vocabulary

_STATUS = {
    "committed": CommitOutcome.COMMITTED,
    "replay": CommitOutcome.REPLAY,
    "fenced": CommitOutcome.FENCED,
    "stale": CommitOutcome.STALE,
}

#: the commit script's KEYS, in order
_COMMIT_KEYS = ("meta", "counters", "offsets", "epochs", "outbox", "log", "uidnext", "novelty",
                "lifecycle", "lease", "stories", "stories_text")  # fmt: skip

_LIFECYCLE = {"cluster.born": "born", "cluster.retired": "retired", "cluster.merged": "merged"}


def lifecycle_marks(
    events: list[dict[str, Any]], if_announced: frozenset[str] = frozenset()
) -> list[list[Any]]:
    """``[index, cluster id, step, event id, only if announced (0/1)]`` of each cluster event
    of a commit, for the commit script's once-per-cluster check (``lifecycle``)."""
    return [
        [
            i,
            e["cluster_id"],
            _LIFECYCLE[e["type"]],
            e["event_id"],
            int(e["event_id"] in if_announced),
        ]
        for i, e in enumerate(events)
        if e.get("type") in _LIFECYCLE and "cluster_id" in e
    ]


class _Trimmed(Exception):
    """The log no longer holds entries a replica has to apply."""


class Commit(Vocabulary):
    """Commit batches and keep the in-memory statistics in step with other writers."""

    def before_batch(self, state: NamespaceState, first_offsets: dict[str, int]) -> None:
        """Point the model's uid counter at this batch's uid slot, and tell it which slots'
        clusters are this writer's."""
        slot = uid_slot(list(first_offsets))
        if slot != self._slot:
            raw = self.client.hget(self.keys["uidnext"], str(slot))
            self._uid_next = 0 if raw is None else self._count("uidnext", str(slot), raw)
            self._slot = slot
        state.stats.ictl[kern.NEXT_UID] = (slot << UID_SLOT_BITS) + self._uid_next
        # the clusters this writer may merge away: those of the partitions it holds, which no
        # other replica holds meanwhile (noveld.models.dpmm.reconcile)
        held = frozenset(uid_slot([k]) for k in self.epochs) | {slot}
        state.stats.lineage.own_slots = held

    def commit(self, state: NamespaceState, request: CommitRequest) -> CommitResult:
        """One atomic Lua call: fence, offsets check, uid slot, log entry, counters, outbox;
        then take in what other writers appended since this writer's previous commit."""
        if request.delta is None:
            slot, uid_end = -1, 0  # no document was seated: no uids were handed out
        elif self._slot is None:
            raise StoreConflict("before_batch() was not called for this batch's partitions")
        else:
            slot = self._slot
            used = int(state.stats.ictl[kern.NEXT_UID]) - (slot << UID_SLOT_BITS)
            uid_end = max(used, self._uid_next)
        header = {
            "epochs": {k: self.epochs.get(k, 0) for k in request.first_offsets},
            "first": request.first_offsets,
            "next": request.next_offsets,
            "counters": request.counters,
            "slot": slot,
            "uid_start": self._uid_next if slot >= 0 else 0,
            "uid_end": uid_end,
            "writer": self.writer,
            "last_seq": self.last_seq,
            "vocab_gen": self.vocab_gen,
            "outbox_chunk": OUTBOX_ENTRY_EVENTS,
            "lifecycle": lifecycle_marks(request.events, request.if_announced),
            "lease_ms": self.lease_ms,
        }
        rows = entries = b""
        if request.stories is not None:
            if request.stories is not self._stories_applied:  # once, also when retried
                state.stories.apply(request.stories)  # this writer's view (not others')
                self._stories_applied = request.stories
            # while no other writer committed since this one loaded, the stored summaries are
            # its table's: the script takes its entries as they are, else folds the change
            done = folded(state.stories, request.stories) if self.stories_in_step else None
            if done is not None:
                lim = request.stories.limits
                header["stories"] = {"put": done.uids, "texts": done.texts,
                                     "limits": {"buckets": lim.buckets}}  # fmt: skip
                entries = done.entries
            else:
                header["stories"] = request.stories.to_json()
                rows = pack_change(request.stories)
        blob = b"" if request.delta is None else encode_delta(request.delta)
        events = [event_json(e) for e in request.events]
        status, reason, seq, foreign, suppressed, raw_facts = self._commit(
            keys=[self.keys[n] for n in _COMMIT_KEYS],
            args=[
                json.dumps(header, separators=(",", ":")),
                blob,
                json.dumps(request.novelty or {}, separators=(",", ":")),
                rows,
                entries,
                *events,
            ],
        )
        outcome, code = text(status), text(reason)
        facts = [text(f) for f in raw_facts]
        if outcome == "fold":  # another writer committed since: send the change to fold
            self.stories_in_step = False
            return self.commit(state, request)
        if outcome == "lost":
            raise self._lost()
        if outcome == "conflict":
            raise StoreConflict.from_commit(code, facts)
        if outcome != "committed":
            return CommitResult(_STATUS[outcome], lease_refusal=lease_refusal(code, facts))
        if slot >= 0:
            self._uid_next = uid_end
        left_out = tuple(text(e) for e in suppressed)
        counters = dict(request.counters)
        if left_out:  # the script did not count births another writer announced
            births = counters.get("births", 0) - births_among(request.events, left_out)
            counters["births"] = births
        state.offsets.update(request.next_offsets)
        for k, v in counters.items():
            state.counters[k] = state.counters.get(k, 0) + v
        seq, foreign = int(seq), int(foreign)
        self.others_writing = foreign > 0 or self._seen_others
        self._seen_others = False
        if foreign > 0:  # others' batches are in the stored summaries, not in this table
            self.stories_in_step = False
        own = seq if blob else None
        seated: dict[int, int] = {}
        if foreign > 0:
            gen = self.vocab_gen
            seated = self._apply_foreign(state, self.last_seq, seq if own is None else seq - 1)
            if self.last_seq >= seq:  # reloaded: already includes everything up to seq
                # another writer compacted the vocabulary just after this commit, and the
                # namespace was loaded afresh: the caller's word ids and novelty state are old
                moved = self.vocab_gen != gen
                return CommitResult(CommitOutcome.COMMITTED, left_out, vocabulary_moved=moved)
        self.last_seq = seq
        if own is not None and seq % self.checkpoint_every == 0:
            self.checkpoint(state)
        return CommitResult(CommitOutcome.COMMITTED, left_out, foreign_docs=seated)

    def refresh(self, state: NamespaceState) -> dict[int, int]:
        """Apply the log entries other writers appended since this writer's last commit or
        refresh (one read), so its next batch is seated against the newest shared model; the
        documents they seated per cluster. :attr:`last_seq` moves past them, so the next
        commit applies only what follows. Nothing happens under the single writer's lease,
        nor when the read finds the vocabulary compacted or the entries trimmed since: the
        commit then refuses or reloads as it would without the refresh. A writer that found
        no other writer's entry over its last batch (neither its refresh nor its commit) skips
        the read, so a lone replica pays nothing; its next commit that applies one turns the
        refresh back on."""
        if self.lease_ms > 0:  # svi: its step does not commute; the lease refuses instead
            return {}
        if not self.others_writing:
            return {}
        pipe = self.client.pipeline(transaction=True)
        pipe.hget(self.keys["meta"], "vocab_gen")
        pipe.xrange(self.keys["log"], f"{self.last_seq + 1}-0", "+")
        try:
            raw_gen, entries = pipe.execute()
        except redis.ResponseError:  # a damaged key: the commit's checks name it
            return {}
        self._seen_others |= bool(entries)
        if not entries or int(text(raw_gen or b"0")) != self.vocab_gen:
            return {}
        upto = int(text(entries[-1][0]).split("-")[0])
        try:
            seated = self._take_in(state, self.last_seq, upto, entries)
        except (_Trimmed, StaleVocabulary):
            return {}
        self.last_seq = upto
        self.stories_in_step = False  # the stored summaries hold others' batches now
        self.refreshed += len(entries)
        return seated

    def _apply_foreign(self, state: NamespaceState, after: int, upto: int) -> dict[int, int]:
        """Apply other writers' log entries (after, upto] to the in-memory statistics; the
        documents they seated per cluster (:func:`seated_by_cluster`). If a
        checkpoint trimmed some of them, or another writer compacted the vocabulary since
        this writer's commit, load the namespace afresh instead (after a compaction with all
        of its state: :attr:`vocab_gen` moves on and the caller rebuilds from it)."""
        gen = self.vocab_gen
        entries = self.client.xrange(self.keys["log"], f"{after + 1}-0", f"{upto}-1")
        try:
            return self._take_in(state, after, upto, entries)
        except (_Trimmed, StaleVocabulary):
            fresh = self._read_state(state.fingerprint)
            if fresh is None:
                raise StoreConflict(
                    f"namespace {self.namespace!r} vanished while running"
                ) from None
            state.stats, state.vocab, state.vocab_gone = fresh.stats, fresh.vocab, fresh.vocab_gone
            state.vocab_checked = fresh.vocab_checked
            self.reloads += 1
            if self.vocab_gen != gen:  # the caller rebuilds from it: all of it, as a load
                state.novelty, state.offsets, state.counters = (
                    fresh.novelty, fresh.offsets, fresh.counters,
                )  # fmt: skip
            return {}

    def _take_in(
        self, state: NamespaceState, after: int, upto: int, entries: list[Any]
    ) -> dict[int, int]:
        """Apply the log entries (after, upto] read as ``entries``; raises _Trimmed or
        StaleVocabulary (words may have been added to ``state``, nothing else) when they
        are not all there or their word ids are beyond the vocabulary."""
        seqs = [int(text(i).split("-")[0]) for i, _ in entries]
        if seqs != list(range(after + 1, upto + 1)):
            raise _Trimmed  # a checkpoint trimmed entries this replica had not read
        deltas = [self._delta(sid, fields) for sid, fields in entries]
        width = max((int(d.word_ids.max()) + 1 for d in deltas if d.word_ids.shape[0]), default=0)
        if width > len(state.vocab):
            self.intern(state, len(state.vocab), [])
        for (sid, _), d in zip(entries, deltas, strict=True):
            self._check_delta(sid, d, len(state.vocab))
        for d in deltas:
            replay_delta(
                state.stats,
                d,
                self.half_life_docs,
                uncounted=lambda: uncounted_ids(state.vocab),
            )
        return seated_by_cluster(
            [(d.cluster_uids.tolist(), d.dm.tolist()) for d in deltas],
            state.stats.lineage.resolve,
        )

    def checkpoint(self, state: NamespaceState) -> bool:
        """Store the in-memory statistics as of ``last_seq`` and trim the log behind the
        previous checkpoint; False if someone already checkpointed at or after it."""
        blob = encode_checkpoint(state.stats, {"seq": self.last_seq, "vocab": len(state.vocab)})
        written = self._checkpoint(
            keys=[self.keys["meta"], self.keys["ckpt"], self.keys["log"]],
            args=[self.last_seq, blob, self.vocab_gen],
        )
        return bool(int(written))
