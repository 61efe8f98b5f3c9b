"""The hybrid's dimension index against the walking kernels it stands in for: the same pool
after the same additions, the same resultants bit for bit, through compactions."""

from __future__ import annotations

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.dpmm.replay import add_counts
from noveld.models.hybrid import HybridConfig, HybridMixture
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


def _hybrid_batch(rng: np.random.Generator, n: int) -> DocBatch:
    """Documents of a few words near one of three topics, each with a unit vector near the
    topic's direction (a zero row for one in five)."""
    words = 2 * P
    docs, emb = [], np.zeros((n, P))
    for d in range(n):
        topic = int(rng.integers(0, 3))
        docs.append((words + rng.choice(np.arange(topic * 6, topic * 6 + 9), 5)).tolist())
        if rng.random() < 0.8:
            x = np.eye(P)[topic] + 0.6 * rng.standard_normal(P)
            emb[d] = x / np.linalg.norm(x)
    b = DocBatch.from_docs(docs, words + 30)
    return DocBatch(b.ptr, b.words, b.counts, b.lengths, words + 30, words, emb=emb)


class _Walking(DimensionIndex):
    """The index's interface on the walking kernels: the code before the index."""

    def add_counts(
        self, stats: MultinomialStats, slots: np.ndarray, words: np.ndarray, raw: np.ndarray
    ) -> None:
        add_counts(stats, slots, words, raw)

    def resultants(self, stats: MultinomialStats, scale: float) -> np.ndarray:
        out = np.empty((P, stats.kmax))
        vtable.gather_resultants_t(
            POS, NEG, stats.head, stats.nxt, stats.pk, stats.pc, stats.kmax, scale, out
        )
        return out.T


def test_the_hybrid_model_steps_alike_through_the_index_and_the_lists() -> None:
    """Forgetting, pruning compactions, merges and retirements: the same seats and pool."""
    models = []
    for _ in range(2):
        config = HybridConfig(
            alpha=10.0, beta=0.1, alpha_scaling="none", deterministic=False, cosine=0.6,
            dimension=P, half_life_docs=200.0, prune_below=0.05, retire_min_mass=0.5,
        )  # fmt: skip
        model = HybridMixture(config)
        model.bind_dimension_words(POS.tolist(), NEG.tolist())
        model.uncounted_words = lambda: np.concatenate([POS, NEG])
        models.append(model)
    models[1]._index = _Walking(POS, NEG)
    states = [models[0].new_state(), models[1].new_state()]
    rng = np.random.default_rng(4)
    for i in range(40):
        batch = _hybrid_batch(rng, 25)
        seats = [
            m.partial_fit(batch, s, np.random.default_rng(i))
            for m, s in zip(models, states, strict=True)
        ]
        np.testing.assert_array_equal(seats[0].assignments, seats[1].assignments)
        for name in ("head", "nxt", "pk", "pc", "ictl", "m", "alive"):
            np.testing.assert_array_equal(getattr(states[0], name), getattr(states[1], name))
    assert states[0].compactions > 0 and states[0].ictl[kern.KMAX] > 3
