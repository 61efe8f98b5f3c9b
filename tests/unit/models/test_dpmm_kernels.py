"""numba kernels of the dpmm model against a slow dense numpy oracle, plus algebraic properties."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from helpers.dpmm_oracle import dense_counts, fitted_state, oracle_log_weights, random_docs
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.special import gammaln

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.models.kernels import multinomial as kern


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.5]), st.sampled_from([0.0, 2.0, 15.0]))
def test_scores_equal_dense_oracle(seed: int, discount: float, s: float) -> None:
    """Seating probabilities against the dense oracle, with and without the length tempering
    (s = 2: an 8-token document's words count as 8·3/10 = 2.4)."""
    model, stats, docs, uids = fitted_state(seed, discount=discount, concentration=s)
    m, n = dense_counts(docs, uids, 30)
    rng = np.random.default_rng(seed + 1)
    for doc in random_docs(rng, 5, 30, max_len=24):  # > 16 tokens: the log path untempered
        batch = DocBatch.from_docs([doc], 30)
        w, c = batch.doc(0)
        slots, p = model.seating_probabilities(w, c, stats, 30)
        oracle = oracle_log_weights(doc, m, n, 30, 0.5, 0.1, discount, s)
        keys = [int(stats.uid[s]) for s in slots] + [-1]
        assert sorted(keys[:-1]) == sorted(m)
        lw = np.array([oracle[k] for k in keys])
        po = np.exp(lw - lw.max())
        np.testing.assert_allclose(p, po / po.sum(), rtol=1e-9, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_seating_probabilities_sum_to_one(seed: int) -> None:
    model, stats, _, _ = fitted_state(seed)
    rng = np.random.default_rng(seed)
    for doc in random_docs(rng, 3, 40):  # includes words never seen
        batch = DocBatch.from_docs([doc], 40)
        _, p = model.seating_probabilities(*batch.doc(0), stats, 40)
        assert np.all(p >= 0)
        assert abs(p.sum() - 1.0) < 1e-12


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 5))
def test_remove_then_add_restores_exactly(seed: int, slot_pick: int) -> None:
    _, stats, docs, _ = fitted_state(seed)
    before = copy.deepcopy(stats)
    slots = stats.active_slots()
    k = int(slots[slot_pick % slots.shape[0]])
    batch = DocBatch.from_docs([docs[seed % len(docs)]], 30)
    w, c = batch.doc(0)
    stats.reserve(0, w.shape[0], 30)
    args = (stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, stats.ictl)
    kern.add_document(k, w, c, int(c.sum()), -1.0, *args)
    kern.add_document(k, w, c, int(c.sum()), 1.0, *args)
    assert np.array_equal(stats.m, before.m) and np.array_equal(stats.ntok, before.ntok)
    for kk in slots:
        wb, cb = before.word_counts(int(kk))
        wa, ca = stats.word_counts(int(kk))
        order_b, order_a = np.argsort(wb), np.argsort(wa)
        assert np.array_equal(wb[order_b], wa[order_a])
        assert np.array_equal(cb[order_b], ca[order_a])


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.01, 0.999))
def test_lazy_decay_equals_eager_decay(seed: int, factor: float) -> None:
    model, lazy, _, _ = fitted_state(seed)
    eager = copy.deepcopy(lazy)
    lazy.decay(factor)
    eager.m *= factor
    eager.ntok *= factor
    eager.pc *= factor
    doc = DocBatch.from_docs([[1, 2, 2, 5]], 30)
    _, p_lazy = model.seating_probabilities(*doc.doc(0), lazy, 30)
    _, p_eager = model.seating_probabilities(*doc.doc(0), eager, 30)
    np.testing.assert_allclose(p_lazy, p_eager, rtol=1e-10)
    slots = lazy.active_slots()
    np.testing.assert_allclose(lazy.mass(slots), eager.mass(slots), rtol=1e-12)


def test_decay_renormalises_without_changing_true_values() -> None:
    _model, stats, _, _ = fitted_state(3)
    slots = stats.active_slots()
    before = stats.mass(slots).copy()
    for _ in range(400):  # far past the renormalisation threshold
        stats.decay(0.5)
        stats.decay(2.0)
    assert stats.scale > 1e-150
    np.testing.assert_allclose(stats.mass(slots), before, rtol=1e-9)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000))
@example(670)  # a batch whose two births merge (found by CI: the replay must apply merges)
def test_delta_replays_the_batch(seed: int) -> None:
    """Applying BatchResult.delta to the pre-batch statistics gives the post-batch statistics,
    following StatsDelta's order: decay, additions, merges, retirement."""
    model, stats, _, _uids = fitted_state(seed, half_life=50.0)
    m0, n0 = {}, {}
    for k in stats.active_slots():
        u = int(stats.uid[k])
        m0[u] = float(stats.mass(np.array([k]))[0])
        w, c = stats.word_counts(int(k))
        n0[u] = dict(zip(w.tolist(), c.tolist(), strict=True))
    rng = np.random.default_rng(seed)
    res = model.partial_fit(DocBatch.from_docs(random_docs(rng, 20, 30), 30), stats, rng)
    d = res.delta
    m1 = {u: v * d.decay for u, v in m0.items()}
    n1 = {u: {w: c * d.decay for w, c in wc.items()} for u, wc in n0.items()}
    for u, dm in zip(d.cluster_uids.tolist(), d.dm.tolist(), strict=True):
        m1[u] = m1.get(u, 0.0) + dm
    for ci, w, c in zip(
        d.word_cluster.tolist(), d.word_ids.tolist(), d.word_count.tolist(), strict=True
    ):
        u = int(d.cluster_uids[ci])
        n1.setdefault(u, {})
        n1[u][w] = n1[u].get(w, 0.0) + c
    for src, dst in d.merges.tolist():  # every count of a merged cluster moves to its survivor
        m1[dst] += m1.pop(src)
        for w, c in n1.pop(src, {}).items():
            n1[dst][w] = n1[dst].get(w, 0.0) + c
    for u in d.retired_uids.tolist():
        m1.pop(u, None)
    for k in stats.active_slots():
        u = int(stats.uid[k])
        assert m1[u] == pytest.approx(float(stats.mass(np.array([k]))[0]), rel=1e-9)
        w, c = stats.word_counts(int(k))
        for ww, cc in zip(w.tolist(), c.tolist(), strict=True):
            assert n1[u][ww] == pytest.approx(cc, rel=1e-9)
    assert set(m1) == {int(stats.uid[k]) for k in stats.active_slots()}


def test_compaction_preserves_scores_bit_for_bit() -> None:
    model, stats, _, _ = fitted_state(11)
    doc = DocBatch.from_docs([[0, 3, 3, 7, 9]], 30)
    _, before = model.seating_probabilities(*doc.doc(0), stats, 30)
    stats.compact()
    _, after = model.seating_probabilities(*doc.doc(0), stats, 30)
    assert np.array_equal(before, after)


def test_same_seed_same_assignments_and_uids_never_reused() -> None:
    runs = [fitted_state(5, n_docs=100, sweeps=2)[3] for _ in range(2)]
    assert runs[0] == runs[1]
    _model, stats, _, _ = fitted_state(5, n_docs=100, sweeps=2)
    live = stats.uid[stats.active_slots()]
    assert len(set(live.tolist())) == live.shape[0]
    assert stats.ictl[kern.NEXT_UID] > live.max()


def test_log_rising_matches_gammaln() -> None:
    for x in [1e-3, 0.03, 1.0, 17.5, 1e6]:
        for n in [0, 1, 2, 7, 16, 17, 60]:
            assert kern.log_rising(x, n) == pytest.approx(
                gammaln(x + n) - gammaln(x), rel=1e-10, abs=1e-10
            )


def test_retirement_and_eviction() -> None:
    model = DPMM(
        DPMMConfig(
            alpha=5.0,
            beta=0.1,
            alpha_scaling="none",
            half_life_docs=5.0,
            retire_min_mass=0.5,
            max_active_clusters=4,
            rejuvenation_sweeps=0,
        )
    )
    stats = model.new_state()
    rng = np.random.default_rng(0)
    retired: list[tuple[int, float, str]] = []
    for _ in range(10):
        res = model.partial_fit(DocBatch.from_docs(random_docs(rng, 10, 200), 200), stats, rng)
        retired += res.retired
        assert stats.alive.sum() <= 4 + len(res.born)
    reasons = {r for _, _, r in retired}
    assert "faded" in reasons or "evicted" in reasons
    alive_uids = set(stats.uid[stats.active_slots()].tolist())
    assert not alive_uids & {u for u, _, _ in retired}


def test_forgetting_keeps_the_postings_pool_bounded() -> None:
    """A drifting vocabulary under forgetting: faded words are pruned, the pool stops growing."""
    model = DPMM(
        DPMMConfig(
            alpha=0.5,
            beta=0.1,
            alpha_scaling="none",
            half_life_docs=200.0,
            rejuvenation_sweeps=0,
            deterministic=True,
        )
    )
    stats = model.new_state()
    rng = np.random.default_rng(0)
    sizes = []
    for b in range(300):
        lo = 20 * b  # the active vocabulary slides forward: old words never come back
        docs = [list(rng.integers(lo, lo + 200, size=6)) for _ in range(50)]
        model.partial_fit(DocBatch.from_docs(docs, lo + 200), stats, rng)
        sizes.append(int(stats.ictl[kern.POOL_USED]))
    assert max(sizes[200:]) <= 1.2 * max(sizes[100:200])
    slots = stats.active_slots()
    total_words = sum(float(stats.word_counts(int(k))[1].sum()) for k in slots)
    assert total_words == pytest.approx(float((stats.ntok[slots] * stats.scale).sum()), rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.5]), st.floats(0.05, 1.0))
def test_linear_hot_path_matches_log_path(seed: int, discount: float, g: float) -> None:
    """The product-form scorer used for short documents equals the log-domain one."""
    _, stats, _, _ = fitted_state(seed, discount=discount)
    stats.decay(g)
    rng = np.random.default_rng(seed)
    kmax = stats.kmax
    lp, wt, out_a, out_b = np.empty(kmax), np.empty(kmax), np.empty(2), np.empty(2)
    for doc in random_docs(rng, 5, 30, max_len=kern.LINEAR_MAX_LEN):
        w, c = DocBatch.from_docs([doc], 30).doc(0)
        args = (
            stats.m,
            stats.ntok,
            stats.alive,
            stats.head,
            stats.nxt,
            stats.pk,
            stats.pc,
            kmax,
            stats.scale,
            0.1,
            3.0,
        )
        lp_new = kern.score_document(w, c, len(doc), lp, *args, np.log(0.7), discount)
        w_new = kern.score_document_linear(w, c, len(doc), wt, *args, 0.7, discount)
        lw = np.append(lp[:kmax], lp_new)
        np.testing.assert_allclose(np.append(wt[:kmax], w_new), np.exp(lw), rtol=1e-10)
        for u in (0.0, 0.3, 0.999):
            for det in (True, False):
                assert kern.choose(lp, kmax, lp_new, u, det, out_a, stats.uid) == (
                    kern.choose_linear(wt, kmax, w_new, u, det, out_b, stats.uid)
                )
                np.testing.assert_allclose(out_a, out_b, rtol=1e-9)


def slow_seat_batch(
    docs: list[list[int]],
    vocab: int,
    alpha: float,
    beta: float,
    discount: float,
    sweeps: int,
    prior: list[tuple[list[int], int]],
    concentration: float = 0.0,
) -> list[int]:
    """Numpy oracle of ``seat_batch`` in MAP mode: sequential CRP seating, then Gibbs sweeps
    (each document's words tempered by its length with s = ``concentration``).

    Clusters are dense count vectors; ``prior`` seeds existing clusters as (doc, cluster) pairs.
    Returns the batch's cluster indices (existing clusters first, new ones in opening order).
    """
    m: list[float] = []
    n: list[np.ndarray] = []
    for doc, k in prior:
        while len(m) <= k:
            m.append(0.0)
            n.append(np.zeros(vocab))
        m[k] += 1
        np.add.at(n[k], doc, 1)
    fresh: set[int] = set()
    assign = [-1] * len(docs)
    for sweep in range(sweeps + 1):
        for d, doc in enumerate(docs):
            x = np.bincount(doc, minlength=vocab).astype(float)
            if sweep > 0:
                k = assign[d]
                m[k] -= 1
                n[k] -= x
                if k in fresh and m[k] < 0.5:
                    m[k], n[k] = 0.0, np.zeros(vocab)
            live = [k for k in range(len(m)) if m[k] > 0.5]
            weights = oracle_log_weights(
                doc,
                {k: m[k] for k in live},
                {k: n[k] for k in live},
                vocab,
                alpha,
                beta,
                discount,
                concentration,
            )
            # MAP with ties (within the kernel's TIE_TOL) to the new cluster, then the oldest
            top = max(weights.values())
            tied = [k for k, v in weights.items() if v >= top - kern.TIE_TOL]
            best = -1 if -1 in tied else min(tied)
            if best == -1:
                best = len(m)
                m.append(0.0)
                n.append(np.zeros(vocab))
                fresh.add(best)
            m[best] += 1
            n[best] += x
            assign[d] = best
    return assign


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from([0.0, 0.5]),
    st.integers(0, 2),
    st.sampled_from([0.0, 2.0, 15.0]),
)
@example(651, 0.0, 2, 0.0)  # an exact tie between two clusters whose predictives round apart
def test_seat_batch_equals_slow_oracle_partition(
    seed: int, discount: float, sweeps: int, s: float
) -> None:
    """MAP seating + sweeps give the same partition of the batch as the dense oracle, with
    and without the words' length tempering."""
    rng = np.random.default_rng(seed)
    vocab = 25
    prior_docs = random_docs(rng, 12, vocab)
    model = DPMM(
        DPMMConfig(
            alpha=0.8,
            beta=0.2,
            alpha_scaling="none",
            discount=discount,
            rejuvenation_sweeps=sweeps,
            deterministic=True,
            merge=False,  # the oracle is of seating; merges and splits are tested on their own
            split=False,
            document_concentration=s,
        )
    )
    stats = model.new_state()
    first = model.partial_fit(DocBatch.from_docs(prior_docs, vocab), stats, rng)
    # the oracle's cluster indices follow the kernel's tie-break order: oldest uid first
    uid_index = {u: i for i, u in enumerate(sorted(set(first.assignments.tolist())))}
    prior = [(d, uid_index[u]) for d, u in zip(prior_docs, first.assignments.tolist(), strict=True)]
    batch = random_docs(rng, 15, vocab, max_len=20)  # > 16 tokens exercises the log path too
    res = model.partial_fit(DocBatch.from_docs(batch, vocab), stats, rng)
    oracle = slow_seat_batch(batch, vocab, 0.8, 0.2, discount, sweeps, prior, s)

    def partition(labels: list[int]) -> set[frozenset[int]]:
        groups: dict[int, set[int]] = {}
        for i, lab in enumerate(labels):
            groups.setdefault(lab, set()).add(i)
        return {frozenset(g) for g in groups.values()}

    assert partition(res.assignments.tolist()) == partition(oracle)
    joined_old = [u in uid_index for u in res.assignments.tolist()]
    assert joined_old == [k < len(uid_index) for k in oracle]


@pytest.mark.parametrize("beta", [0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.7])
@pytest.mark.parametrize("pad", [0, 20])  # 5 tokens: the linear path; 25: the log path
@pytest.mark.parametrize("a_first", [True, False])
def test_map_tie_between_equal_predictives_goes_to_the_oldest(
    beta: float, pad: int, a_first: bool
) -> None:
    """Cluster A = {a, b, e}, B = {c, c, d}; the document {a, b, b, c, d} has the predictive
    factor (1+β)/β · (2+β)/β in both (paper 004 eq. 4), from other words in another order, so it
    rounds apart. MAP seating must take the older cluster, whichever of the two that is."""
    a, b, c, d, e = 0, 1, 2, 3, 4
    cluster_a, cluster_b = [a, b, e], [c, c, d]
    model = DPMM(
        DPMMConfig(
            alpha=1.0,  # the second prior document opens its own cluster; the last joins
            discount=0.0,
            beta=beta,
            alpha_scaling="none",
            rejuvenation_sweeps=0,
            deterministic=True,
            merge=False,
            split=False,
        )
    )
    stats = model.new_state()
    rng = np.random.default_rng(0)
    prior = [cluster_a, cluster_b] if a_first else [cluster_b, cluster_a]
    first = model.partial_fit(DocBatch.from_docs(prior, 400), stats, rng).assignments.tolist()
    assert first[0] < first[1]
    doc = [a, b, b, c, d, *range(10, 10 + pad)]
    seated = model.partial_fit(DocBatch.from_docs([doc], 400), stats, rng).assignments.tolist()
    assert seated == [first[0]]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(1, 12))
def test_add_word_counts_equals_one_entry_at_a_time(seed: int, n: int, n_slots: int) -> None:
    """The word-by-word replay (one postings walk per word) gives the counts of adding each
    (slot, word) entry by itself, duplicates included, and allocates only missing entries."""
    rng = np.random.default_rng(seed)

    def pool(size: int = 400) -> tuple[np.ndarray, ...]:
        head = np.full(8, -1, dtype=np.int64)
        nxt = np.full(size, -1, dtype=np.int64)
        pk = np.zeros(size, dtype=np.int64)
        pc = np.zeros(size)
        ictl = np.zeros(kern.ICTL_SIZE, dtype=np.int64)
        return head, nxt, pk, pc, ictl

    fast, slow = pool(), pool()
    # the same pre-existing postings in both pools
    for _ in range(int(rng.integers(0, 30))):
        w, k, c = int(rng.integers(0, 8)), int(rng.integers(0, n_slots)), float(rng.random())
        for p in (fast, slow):
            e = kern.find_or_alloc(w, k, *p)
            p[3][e] += c
    slots = rng.integers(0, n_slots, n).astype(np.int64)
    words = rng.integers(0, 8, n).astype(np.int64)
    counts = rng.random(n) * 3
    kern.add_word_counts(slots, words, counts, *fast)
    for j in range(n):
        e = kern.find_or_alloc(int(words[j]), int(slots[j]), *slow)
        slow[3][e] += counts[j]

    def table(p: tuple[np.ndarray, ...]) -> dict[tuple[int, int], float]:
        head, nxt, pk, pc, _ = p
        out = {}
        for w in range(8):
            e = head[w]
            while e >= 0:
                assert (w, int(pk[e])) not in out  # one entry per (word, slot)
                out[(w, int(pk[e]))] = float(pc[e])
                e = nxt[e]
        return out

    assert table(fast) == table(slow)  # bit-identical counts
    assert fast[4][kern.POOL_USED] == slow[4][kern.POOL_USED]


def test_postings_entries_lists_every_live_count_once() -> None:
    model = DPMM(DPMMConfig(rejuvenation_sweeps=1))
    stats = model.new_state()
    rng = np.random.default_rng(4)
    model.partial_fit(DocBatch.from_docs(random_docs(rng, 30, 25), 25), stats, rng)
    w, k, c = kern.postings_entries(stats.head, stats.nxt, stats.pk, stats.pc, 25)
    got = {(int(a), int(b)): float(x) for a, b, x in zip(w, k, c, strict=True)}
    want = {}
    for slot in stats.active_slots().tolist():
        ws, cs = stats.word_counts(slot)
        want.update({(int(a), slot): float(x) / stats.scale for a, x in zip(ws, cs, strict=True)})
    assert len(got) == len(w) and got == pytest.approx(want)


@pytest.mark.parametrize("kind", ["dpmm", "svi"])
def test_a_cluster_retired_in_this_step_keeps_its_terms_until_compaction(kind: str) -> None:
    """A story born and evicted in one step is still described by its cluster.born event:
    ``term_weights`` reads a retired cluster's counts until the pool is compacted."""
    from noveld.models.svi import SVI, SVIConfig

    model = DPMM(DPMMConfig(deterministic=True)) if kind == "dpmm" else SVI(SVIConfig())
    stats = model.new_state()
    docs = [[1, 2, 3]] * 4 + [[10, 11, 12]] * 4
    res = model.partial_fit(DocBatch.from_docs(docs, 20), stats, np.random.default_rng(0))
    uid = int(res.assignments[-1])
    words, counts = model.term_weights(stats, uid)
    assert set(words.tolist()) >= {10, 11, 12}
    stats.retire(np.array([stats.slot_of(uid)]))
    assert stats.slot_of(uid) == -1
    again = model.term_weights(stats, uid)
    np.testing.assert_array_equal(again[0], words)
    np.testing.assert_allclose(again[1], counts)
    stats.compact()
    assert model.term_weights(stats, uid)[0].shape[0] == 0
