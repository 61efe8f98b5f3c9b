"""Two writers of one namespace in a test: each seats its own batches with its own uid slot
and takes in the other's deltas in log order, as the Redis commit does; and a stream of
stories whose births reach both writers at once."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from noveld.models.base import DocBatch, StatsDelta
from noveld.models.dpmm import replay_delta
from noveld.models.kernels import multinomial as kern

SLOT_BITS = 40
Log = list[tuple[int, StatsDelta]]


class Replica:
    """One writer: its own uid slot, its statistics and how far it has read the log."""

    def __init__(self, model: Any, slot: int) -> None:
        self.model, self.slot = model, slot
        self.stats = model.new_state()
        self.uid_next = slot << SLOT_BITS
        self.last_seq = 0  # log entries 1..last_seq are in ``stats``
        self.merges: list[tuple[int, int]] = []
        self.assigned: dict[int, int] = {}

    def fit(self, batch: DocBatch, ids: list[int], rng: np.random.Generator) -> StatsDelta:
        """Seat ``batch`` (document ids ``ids``) with this writer's uids; its delta."""
        self.stats.ictl[kern.NEXT_UID] = self.uid_next
        res = self.model.partial_fit(batch, self.stats, rng)
        self.uid_next = int(self.stats.ictl[kern.NEXT_UID])
        self.merges += [(a, b) for a, b, _ in res.merged]
        self.assigned.update(zip(ids, res.assignments.tolist(), strict=True))
        return res.delta  # type: ignore[no-any-return]

    def commit(self, log: Log, delta: StatsDelta) -> None:
        """Append the delta, then apply the other writers' entries appended since the last
        commit (they precede this one in the log: the order the Redis commit applies them)."""
        log.append((self.slot, delta))
        seq = len(log)
        for writer, d in log[self.last_seq : seq - 1]:
            if writer != self.slot:
                replay_delta(self.stats, d, 0.0, uncounted=self.model.uncounted_words)
        self.last_seq = seq

    def catch_up(self, log: Log) -> None:
        """Apply the other writers' entries not yet taken in."""
        for writer, d in log[self.last_seq :]:
            if writer != self.slot:
                replay_delta(self.stats, d, 0.0, uncounted=self.model.uncounted_words)
        self.last_seq = len(log)


Round = list[list[tuple[int, list[int], int]]]


def story_stream(
    seed: int, vocab: int, stories: int = 12, per_round: int = 3, rounds: int = 8
) -> list[Round]:
    """Rounds of documents (word ids below ``vocab``): each story starts in some round with
    documents on both writers at once (concurrent births), then goes on. Per round, per
    writer: (document id, words, story)."""
    rng = np.random.default_rng(seed)
    words = [rng.choice(vocab, 12, replace=False) for _ in range(stories)]
    start = rng.integers(0, rounds // 2, stories)
    start[:2] = 0
    doc_id = itertools.count()
    out = []
    for r in range(rounds):
        live = [s for s in range(stories) if start[s] <= r]
        round_docs: Round = [[], []]
        for w in range(2):
            for s in live:
                for _ in range(per_round):
                    doc = rng.choice(words[s], 5).tolist()
                    round_docs[w].append((next(doc_id), doc, s))
            order = rng.permutation(len(round_docs[w]))
            round_docs[w] = [round_docs[w][i] for i in order]
        out.append(round_docs)
    return out


def resolved_clusters(replica: Replica, assigned: dict[int, int]) -> dict[int, int]:
    """Each document's cluster as ``replica`` sees it now (merged-away uids followed)."""
    return {d: replica.stats.lineage.resolve(u) for d, u in assigned.items()}


Docs = list[tuple[int, list[int], int]]


def run_rounds(
    model: Any, seed: int, vocab: int, batch_of: Callable[[Docs, int], DocBatch]
) -> tuple[Replica, Replica, Log, dict[int, int]]:
    """Two replicas of ``model`` over :func:`story_stream`: per round both seat their batch
    (``batch_of(docs, round)``) before either sees the other's, then commit, in alternating
    order; both catch up at the end. Returns them, the log and each document's story."""
    a, b = Replica(model, 0), Replica(model, 1)
    log: Log = []
    story_of: dict[int, int] = {}
    rng_a, rng_b = np.random.default_rng(seed), np.random.default_rng(seed + 1)
    for r, (docs_a, docs_b) in enumerate(story_stream(seed, vocab)):
        story_of.update({i: s for i, _, s in docs_a + docs_b})
        da = a.fit(batch_of(docs_a, r), [i for i, _, _ in docs_a], rng_a)
        db = b.fit(batch_of(docs_b, -r), [i for i, _, _ in docs_b], rng_b)
        first, second = ((a, da), (b, db)) if r % 2 == 0 else ((b, db), (a, da))
        first[0].commit(log, first[1])
        second[0].commit(log, second[1])
    a.catch_up(log)
    b.catch_up(log)
    return a, b, log, story_of
