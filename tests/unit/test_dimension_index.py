"""The hybrid's dimension index against the walking kernels it stands in for: the same pool
after the same additions, the same resultants bit for bit, through compactions."""

from __future__ import annotations

import numpy as np

from noveld.models.dpmm.replay import add_counts
from noveld.models.hybrid_index import DimensionIndex
from noveld.models.kernels import dimension_index as dkern
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels import vmf_table as vtable
from noveld.models.suffstats import MultinomialStats

P = 8
POS = np.arange(40, 40 + 2 * P, 2, dtype=np.int64)
NEG = POS + 1


def test_stable_order_is_a_stable_argsort() -> None:
    rng = np.random.default_rng(0)
    for n, hi in [(0, 1), (1, 1), (50, 5), (1000, 300)]:
        words = rng.integers(0, hi, n).astype(np.int64)
        np.testing.assert_array_equal(
            dkern.stable_order(words), np.argsort(words, kind="mergesort")
        )


def _batch(rng: np.random.Generator, kmax: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random additions: words 0–39 and dimension entries, unique (slot, word) pairs."""
    slots = rng.integers(0, kmax, 60)
    words = np.where(
        rng.random(60) < 0.5, rng.integers(0, 40, 60), rng.integers(40, 40 + 2 * P, 60)
    )
    keys = np.unique(slots * 100 + words)
    rng.shuffle(keys)
    return keys // 100, keys % 100, rng.random(keys.shape[0]) + 0.1


def _resultants_walked(stats: MultinomialStats) -> np.ndarray:
    out = np.empty((P, stats.kmax))
    vtable.gather_resultants_t(
        POS, NEG, stats.head, stats.nxt, stats.pk, stats.pc, stats.kmax, 0.5, out
    )
    return out.T


def test_indexed_additions_and_resultants_equal_the_walking_kernels() -> None:
    rng = np.random.default_rng(1)
    walked, indexed = MultinomialStats(), MultinomialStats()
    index = DimensionIndex(POS, NEG)
    kmax = 0
    for step in range(40):
        new = int(rng.integers(0, 3))
        for s in (walked, indexed):
            s.reserve(new, 200, 40 + 2 * P)
            s.ictl[kern.KMAX] = kmax + new  # slots opened
            s.alive[: kmax + new] = True
        kmax += new
        if kmax == 0:
            continue
        slots, words, raw = _batch(rng, kmax)
        add_counts(walked, slots, words, raw)
        index.add_counts(indexed, slots, words, raw)
        for name in ("head", "nxt", "pk", "pc", "ictl"):
            np.testing.assert_array_equal(getattr(walked, name), getattr(indexed, name), name)
        got = index.resultants(indexed, 0.5)
        assert np.array_equal(got, _resultants_walked(walked)) and np.any(got != 0.0)
        if step % 7 == 6:  # a compaction moves every entry: the index is rebuilt
            dead = int(rng.integers(0, kmax))
            for s in (walked, indexed):
                s.alive[dead] = False
                s.compact(prune_below=0.3)
                s.alive[dead] = True
    assert walked.compactions == indexed.compactions > 0


def test_an_index_follows_the_statistics_it_is_given() -> None:
    rng = np.random.default_rng(2)
    a, b = MultinomialStats(), MultinomialStats()
    index = DimensionIndex(POS, NEG)
    for s in (a, b):
        s.reserve(4, 200, 40 + 2 * P)
        s.ictl[kern.KMAX] = 4
        s.alive[:4] = True
        index.add_counts(s, *_batch(rng, 4))
    assert np.array_equal(index.resultants(a, 0.5), _resultants_walked(a))
    assert np.array_equal(index.resultants(b, 0.5), _resultants_walked(b))


def test_merge_entries_equals_its_numpy_reference() -> None:
    rng = np.random.default_rng(3)
    for n_clusters in (0, 1, 7):
        v1 = 100
        ids = rng.permutation(np.arange(60, 60 + 2 * P)).astype(np.int64)
        ukey = np.unique(rng.integers(0, max(n_clusters, 1) * v1, 30))
        ukey = ukey[ukey % v1 < 60] if n_clusters else ukey[:0]
        wc = rng.random(ukey.shape[0])
        pos = np.maximum(rng.normal(size=(n_clusters, P)), 0.0)
        neg = np.maximum(rng.normal(size=(n_clusters, P)), 0.0)
        pos[:, 0] = 0.0  # a dimension no document has a part on
        args = (ukey, wc, v1, pos, neg, np.argsort(ids), ids)
        got, want = dkern.merge_entries(*args), dkern.merge_entries_reference(*args)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, w)
        assert got[0].shape[0] == ukey.shape[0] + np.count_nonzero(pos) + np.count_nonzero(neg)
