"""Known-label absorption for the ``hdp`` model: a category that is the unlabelled twin of a
known one is merged into it, judged on each category's expected word counts."""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.dpmm.merges import absorption_gains, greedy_absorptions
from noveld.models.hdp.config import HDPConfig
from noveld.models.hdp.topics import is_topic
from noveld.models.hdp.vectors import CategoryVectors
from noveld.models.kernels import multinomial as mkern
from noveld.models.suffstats import MultinomialStats


def absorb_into_known(
    stats: MultinomialStats,
    assignments: np.ndarray,
    pinned: Collection[int],
    gamma: float,
    fading: set[int],
    batch: DocBatch,
    cfg: HDPConfig,
    topic_words: np.ndarray | None,
    vectors: CategoryVectors | None = None,
) -> list[tuple[int, int]]:
    """(category uid, known category uid) merges: other categories absorbed into the known
    categories this batch's documents went to, as ``dpmm`` does
    (:func:`noveld.models.dpmm.merges.absorb_into_known`).

    A twin category claimed topics of its own, so it shares none with its known category
    and a test on category–topic counts cannot see that they are one story. The test is
    therefore ``dpmm``'s merge test on each category's expected word counts
    ``Σ_l O_kl φ_l(w)`` (φ_l the topic's word distribution, its counts normalised), with
    the tables' Pitman–Yor prior; a merge moves the category–topic counts and tables, so the
    topics and their words are untouched. Applied by :func:`finish_delta`, like a replica's.
    With ``vectors``, the test adds the vector view's (:meth:`CategoryVectors.merge_gains`).
    """
    if not pinned or not cfg.merge or topic_words is None:
        return []
    kmax = stats.kmax
    uids = stats.uid[:kmax]
    category = stats.alive[:kmax] & ~is_topic(uids)
    is_known = category & np.isin(uids, np.fromiter(pinned, dtype=np.int64))
    in_batch = np.isin(uids, assignments)
    if not np.any(is_known & in_batch):
        return []
    expected = expected_word_stats(stats, category, batch.vocab_size, topic_words)
    cats = np.flatnonzero(category)  # slot j of ``expected`` is category slot cats[j]
    touched = np.flatnonzero((is_known & in_batch)[cats]).astype(np.int64)
    eligible = ~is_known[cats] & ~np.isin(uids[cats], np.fromiter(fading, dtype=np.int64))
    log_new = math.log(gamma + cfg.discount * (cats.shape[0] - 1))
    gains = absorption_gains(
        expected, touched, eligible, np.arange(batch.vocab_size, dtype=np.int64), cfg.beta,
        batch.n_words * cfg.beta, log_new, cfg.discount,
    )  # fmt: skip
    if vectors is not None:
        gains += vectors.merge_gains(stats, cats, touched)
    pairs = greedy_absorptions(gains, touched, cfg.absorb_margin, set())
    return [(int(uids[cats[src]]), int(uids[cats[dst]])) for src, dst in pairs]


def expected_word_stats(
    stats: MultinomialStats, category: np.ndarray, vocab_size: int, topic_words: np.ndarray
) -> MultinomialStats:
    """Statistics whose cluster j is category ``flatnonzero(category)[j]``: its tables as
    ``m`` and its expected word counts ``Σ_l O_kl n_lw / n_l`` (true units)."""
    kmax = stats.kmax
    w, k, c = mkern.postings_entries(stats.head, stats.nxt, stats.pk, stats.pc, vocab_size)
    c = c * stats.scale
    cats = np.flatnonzero(category)
    row_of = np.full(kmax, -1, dtype=np.int64)
    row_of[cats] = np.arange(cats.shape[0])
    topic_of_word = np.full(max(vocab_size, int(topic_words.max()) + 1), -1, np.int64)
    topic_of_word[topic_words] = np.arange(topic_words.shape[0])
    slot_of_topic = np.full(topic_words.shape[0], -1, dtype=np.int64)
    topic_slots = np.flatnonzero(stats.alive[:kmax] & is_topic(stats.uid[:kmax]))
    slot_of_topic[stats.uid[topic_slots] & ((1 << 40) - 1)] = topic_slots
    # category–topic counts O_kl, and each topic's words n_lw over n_l
    ct = (row_of[k] >= 0) & (topic_of_word[w] >= 0)
    cat_row, cat_topic_slot, o = row_of[k[ct]], slot_of_topic[topic_of_word[w[ct]]], c[ct]
    tw = np.isin(k, topic_slots) & (topic_of_word[w] < 0)
    t_slot, t_word, t_raw = k[tw], w[tw], c[tw]
    per_topic = np.bincount(t_slot, weights=t_raw, minlength=kmax)  # n_l
    t_count = t_raw / np.maximum(per_topic[t_slot], 1e-300)
    order = np.argsort(t_slot, kind="stable")
    t_slot, t_word, t_count = t_slot[order], t_word[order], t_count[order]
    starts = np.searchsorted(t_slot, cat_topic_slot)
    ends = np.searchsorted(t_slot, cat_topic_slot, side="right")
    lens = ends - starts
    idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
    rows = np.repeat(cat_row, lens)
    words = t_word[idx]
    counts = t_count[idx] * np.repeat(o, lens)
    out = MultinomialStats()
    n = cats.shape[0]
    out.reserve(n, int(words.shape[0]), vocab_size)
    out.m[:n] = stats.m[cats] * stats.scale
    out.alive[:n] = True
    out.uid[:n] = np.arange(n)
    out.ntok[:n] = np.bincount(rows, weights=counts, minlength=n)
    out.ictl[mkern.KMAX] = n
    mkern.add_word_counts(rows, words, counts, out.head, out.nxt, out.pk, out.pc, out.ictl)
    return out
