"""Applying a batch's :class:`StatsDelta` to statistics: the one path by which a writer, a
restarted process and a replica change their counts, so all of them end up equal."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from noveld.models.base import StatsDelta
from noveld.models.dpmm.clusters import move_counts
from noveld.models.dpmm.config import DPMMConfig
from noveld.models.kernels import multinomial as kern
from noveld.models.lineage import Lineage
from noveld.models.suffstats import MultinomialStats

UncountedWords = Callable[[], np.ndarray]
"""Ids of the vocabulary entries whose counts are not tokens (hdp context values and fields,
vmf dimensions: :func:`noveld.models.vocabulary.uncounted_ids`); asked only when pruning."""


AddCounts = Callable[[MultinomialStats, np.ndarray, np.ndarray, np.ndarray], None]
"""Adds raw counts to the (word, slot) entries of statistics with room reserved (arguments:
the statistics, slots, word ids, raw counts): :func:`add_counts` or a faster equal form."""


def add_counts(
    stats: MultinomialStats, slots: np.ndarray, words: np.ndarray, raw: np.ndarray
) -> None:
    """:func:`~noveld.models.kernels.multinomial.add_word_counts` on ``stats``' pool."""
    kern.add_word_counts(slots, words, raw, stats.head, stats.nxt, stats.pk, stats.pc, stats.ictl)


def no_uncounted_words() -> np.ndarray:
    """Every entry is a token (plain text models)."""
    return np.zeros(0, dtype=np.int64)


def advance_documents(
    stats: MultinomialStats,
    n_docs: int,
    half_life_docs: float,
    prune_below: float,
    uncounted: UncountedWords = no_uncounted_words,
) -> None:
    """Count one more batch of ``n_docs`` documents; under forgetting, prune faded words
    whenever the count crosses a multiple of a quarter half-life.

    Forgotten words leave the pool so memory stays bounded; pruning happens at fixed document
    counts so a resumed or replaying process prunes exactly where a clean one does. Pruned
    ``uncounted`` entries leave the token masses alone (they were never in them).
    """
    seen = int(stats.ictl[kern.DOCS_SEEN])
    stats.ictl[kern.DOCS_SEEN] = seen + n_docs
    stats.ictl[kern.STEPS] += 1
    if half_life_docs > 0:
        period = max(int(half_life_docs / 4), 1)
        if (seen + n_docs) // period > seen // period:
            stats.compact(prune_below, uncounted())


def replay_delta(
    stats: MultinomialStats,
    delta: StatsDelta,
    half_life_docs: float,
    prune_below: float = DPMMConfig.prune_below,
    uncounted: UncountedWords = no_uncounted_words,
) -> None:
    """Apply a batch's :class:`StatsDelta` to statistics, in the order ``partial_fit`` changed
    them: decay, add the batch's counts (opening clusters unknown here), merges, retire, count
    the documents and prune on schedule.

    This is how a restarted process rebuilds its model from a checkpoint plus the delta log, and
    how a replica takes in the batches other replicas committed (scale-out). With integer
    counts (no forgetting) the result equals the writer's statistics exactly (and for ``svi``
    always: its writer applies its own step through :func:`apply_additions`). With ``foreign``
    the clusters the delta opened become merge candidates of the next batch (two replicas may
    each open a cluster for one story).
    """
    apply_additions(stats, delta)
    finish_delta(stats, delta, half_life_docs, prune_below, uncounted)


def apply_additions(
    stats: MultinomialStats, delta: StatsDelta, add: AddCounts = add_counts
) -> None:
    """First half of :func:`replay_delta`: the decay and the batch's additions (through
    ``add``). Additions to a cluster merged away here go to its survivor
    (:meth:`Lineage.resolve`); the delta's births become young merge candidates
    (:mod:`noveld.models.lineage`)."""
    stats.decay(delta.decay)
    lineage = stats.lineage
    kmax = stats.kmax
    slot_of = {int(u): k for k, u in enumerate(stats.uid[:kmax].tolist()) if stats.alive[k]}
    uids = delta.cluster_uids.tolist()
    if lineage.merged_into:  # written by a writer that had not seen the merge yet
        uids = [r if (r := lineage.resolve(u)) in slot_of else u for u in uids]
    unknown = list(dict.fromkeys(u for u in uids if u not in slot_of))
    vocab_size = int(delta.word_ids.max()) + 1 if delta.word_ids.shape[0] else 0
    stats.reserve(len(unknown), int(delta.word_ids.shape[0]), vocab_size)
    next_uid = int(stats.ictl[kern.NEXT_UID])
    for u in unknown:
        stats.ictl[kern.NEXT_UID] = u
        k = kern.open_cluster(stats.alive, stats.uid, stats.fresh, stats.free_stack, stats.ictl)
        stats.fresh[k] = False
        slot_of[u] = k
    step = int(stats.ictl[kern.STEPS])
    for u in delta.born_uids.tolist():  # merge candidates of the next batches
        if u in slot_of:
            lineage.add_young(u, step)
    stats.ictl[kern.NEXT_UID] = max([next_uid, *(u + 1 for u in delta.born_uids.tolist())])
    slots = np.array([slot_of[u] for u in uids], dtype=np.int64)
    inv = 1.0 / stats.scale
    np.add.at(stats.m, slots, delta.dm * inv)
    np.add.at(stats.ntok, slots, delta.dntok * inv)
    add(stats, slots[delta.word_cluster], delta.word_ids.astype(np.int64), delta.word_count * inv)


def finish_delta(
    stats: MultinomialStats,
    delta: StatsDelta,
    half_life_docs: float,
    prune_below: float,
    uncounted: UncountedWords = no_uncounted_words,
) -> None:
    """Second half of :func:`replay_delta`: merges, retirements, the document count.

    A merge one of whose clusters was merged away here already (another writer decided a merge
    of the same story) joins the two survivors instead, the lower uid surviving
    (:func:`merge_survivors`); a merge already made here is a no-op."""
    kmax = stats.kmax
    slot_of = {int(u): k for k, u in enumerate(stats.uid[:kmax].tolist()) if stats.alive[k]}
    merged_away: set[int] = set()
    for src_uid, dst_uid in delta.merges.tolist():
        pair = merge_survivors(stats.lineage, src_uid, dst_uid)
        merged_away.add(src_uid)
        if pair is None:
            continue
        src_u, dst_u = pair
        src, dst = slot_of.get(src_u), slot_of.get(dst_u)
        if src is None or dst is None:
            continue  # retired here already (another replica's view differed)
        move_counts(stats, src, dst)
        stats.retire(np.array([src], dtype=np.int64))
        del slot_of[src_u]
        stats.lineage.record(src_u, dst_u, int(stats.ictl[kern.STEPS]))
    retired = [u for u in delta.retired_uids.tolist() if u not in merged_away]
    gone = [slot_of[u] for u in retired if u in slot_of]
    if gone:
        stats.retire(np.array(gone, dtype=np.int64))
    advance_documents(stats, delta.documents(), half_life_docs, prune_below, uncounted)


def merge_survivors(lineage: Lineage, src_uid: int, dst_uid: int) -> tuple[int, int] | None:
    """(merged-away uid, survivor uid) for replaying the merge of ``src_uid`` into
    ``dst_uid``: as decided when neither was merged away here, else the two clusters they live
    on in, the lower uid surviving; None when those are one cluster already."""
    a, b = lineage.resolve(src_uid), lineage.resolve(dst_uid)
    if a == b:
        return None
    if (a, b) == (src_uid, dst_uid):
        return a, b
    return (a, b) if a > b else (b, a)
