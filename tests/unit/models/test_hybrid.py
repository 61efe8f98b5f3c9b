"""The hybrid likelihood (words × vectors): the seating kernel against a dense numpy oracle, and
the model against the two it combines: with view weight 0 it seats as the words model, without
words as the vmf model; its deltas replay to the writer's state."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.hybrid_oracle import P, V, hybrid, make_batch, oracle_seat, oracle_weights, run_kernel
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig, replay_delta
from noveld.models.hybrid import HybridConfig
from noveld.models.kernels import hybrid as hkern
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels import vmf as vkern
from noveld.models.kernels import vmf_table as vtable
from noveld.models.vmf import VMFConfig, VMFMixture
from noveld.state.base import NamespaceState, state_digest


@pytest.mark.parametrize(("p", "cosine"), [(P, 0.6), (2, 0.5), (3, 0.9), (64, 0.4), (256, 0.4),
                                           (384, 0.3)])  # fmt: skip
def test_the_normalizer_table_matches_the_exact_function(p: int, cosine: float) -> None:
    """The seating's tabulated log C_p(κ√q) is within 1e-12 · max(|log C_p|, 1) of the exact
    :func:`~noveld.models.kernels.vmf.log_vmf_normalizer` over 20 decades of q (and exact
    outside the table and at 0). The kernel-against-oracle tests below compare the tabulated
    kernel with the exact oracle at 1e-9: the table's error is 1e-3 of that on their values."""
    kappa = vkern.kappa_from_cosine(cosine, p)
    table = vtable.normalizer_table(p, kappa)
    rng = np.random.default_rng(p)
    q = np.concatenate([
        np.exp(rng.uniform(math.log(1e-8), math.log(1e14), 20_000)),
        rng.uniform(0.0, 4.0, 5_000), [0.0, 1.0, 2.0**-22, 2.0**-21, 2.0**41, 2.0**42],
    ])  # fmt: skip
    exact = vtable.log_normalizers(p, kappa * np.sqrt(q))
    got = vtable.log_normalizers_sq(q, table, p, kappa)
    assert np.all(np.abs(got - exact) <= 1e-12 * np.maximum(np.abs(exact), 1.0))
    assert got[-6] == exact[-6] == vkern.log_sphere_density_at_zero(p)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from([0.0, 0.5, 1.0, 2.0]),
    st.sampled_from([0, 2]),
    st.sampled_from([0.0, 0.5]),
    st.sampled_from([0.0, 40.0]),
    st.sampled_from([0.0, 2.0, 15.0]),
)
def test_seating_kernel_equals_the_dense_oracle(
    seed: int, w: float, sweeps: int, discount: float, half_life: float, s: float
) -> None:
    """The kernel (tabulated normaliser) against the oracle (exact normaliser): the same
    seats, and log normalisers and margins within 1e-9 (the table is within ~1e-13 of the
    exact function on these values, see the table's test), with and without the words'
    length tempering (s = 0: none; s = 2: a 12-token document's words count as 3)."""
    rng = np.random.default_rng(seed)
    model = hybrid(w, discount=discount, half_life_docs=half_life, rejuvenation_sweeps=1,
                   document_concentration=s)  # fmt: skip
    stats = model.new_state()
    for _ in range(2):  # a state with old clusters (decayed with a half-life)
        model.partial_fit(make_batch(rng, 12, 0.9, 0.8), stats, rng)
    batch = make_batch(rng, 10, 0.8, 0.7)
    assign, log_norm, margin = run_kernel(model, stats, batch, sweeps)
    ref, ref_norm, ref_margin, _ = oracle_seat(model, stats, batch, sweeps)
    assert assign.tolist() == ref
    np.testing.assert_allclose(log_norm, ref_norm, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(margin, ref_margin, rtol=1e-9, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from([0.25, 1.0, 4.0]),
    st.sampled_from([0, 2]),
    st.sampled_from([0.0, 0.5]),
    st.sampled_from([0.3, 0.6, 0.9]),
    st.sampled_from([1.0, 0.5]),
)
def test_map_seating_scores_only_the_slots_that_could_win_and_agrees(
    seed: int, w: float, sweeps: int, discount: float, cosine: float, length: float
) -> None:
    """Without the log normalisers the MAP kernel leaves out the slots its vector bound rules
    out: the seats and the margins are those of the full scoring, exactly (also for the
    batch's vectors shortened to ``length``, which the scores still count as unit)."""
    rng = np.random.default_rng(seed)
    model = hybrid(w, discount=discount, cosine=cosine, rejuvenation_sweeps=1)
    stats = model.new_state()
    for _ in range(3):
        model.partial_fit(make_batch(rng, 30, 0.9, 0.9), stats, rng)
    batch = make_batch(rng, 25, 0.8, 0.9)
    assert batch.emb is not None
    batch.emb[:] *= length
    full = run_kernel(model, stats, batch, sweeps, want_norm=True)
    pruned = run_kernel(model, stats, batch, sweeps, want_norm=False)
    assert pruned[0].tolist() == full[0].tolist()
    assert pruned[2].tolist() == full[2].tolist()
    assert np.isnan(pruned[1]).all()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 6), st.integers(1, 5))
def test_overlay_add_then_remove_restores_it(seed: int, n_words: int, n_docs: int) -> None:
    rng = np.random.default_rng(seed)
    ov_ptr = np.arange(0, (n_words + 1) * n_docs, n_docs, dtype=np.int64)
    ov_slot = np.empty(n_words * n_docs, dtype=np.int64)
    ov_cnt = np.empty(n_words * n_docs, dtype=np.int64)
    ov_n = np.zeros(n_words, dtype=np.int64)
    adds = [(int(rng.integers(0, n_words)), int(rng.integers(0, 4)), int(rng.integers(1, 3)))
            for _ in range(n_docs)]  # fmt: skip
    for u, k, c in adds:
        hkern._overlay_add(u, k, c, ov_ptr, ov_slot, ov_cnt, ov_n)
    table: dict[tuple[int, int], int] = {}
    for u, k, c in adds:
        table[u, k] = table.get((u, k), 0) + c
    got = {(u, int(ov_slot[e])): int(ov_cnt[e]) for u in range(n_words)
           for e in range(ov_ptr[u], ov_ptr[u] + ov_n[u])}  # fmt: skip
    assert got == table
    for u, k, c in reversed(adds):
        hkern._overlay_add(u, k, -c, ov_ptr, ov_slot, ov_cnt, ov_n)
    assert not ov_n.any()


# ---- the model against the two it combines --------------------------------------------------
def partition(labels: list[int]) -> set[frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for i, lab in enumerate(labels):
        groups.setdefault(lab, set()).add(i)
    return {frozenset(g) for g in groups.values()}


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from([0, 2]),
    st.sampled_from([0.0, 0.5]),
    st.sampled_from([0.0, 50.0]),
)
def test_with_view_weight_zero_it_seats_as_the_words_model(
    seed: int, sweeps: int, discount: float, half_life: float
) -> None:
    rng = np.random.default_rng(seed)
    batches = [make_batch(rng, 15, 1.0, 0.8) for _ in range(4)]
    cfg = dict(alpha=0.5, beta=0.1, alpha_scaling="none", retire_min_mass=0.0, deterministic=True,
               discount=discount, half_life_docs=half_life, rejuvenation_sweeps=sweeps)  # fmt: skip
    words = DPMM(DPMMConfig(**cfg, merge=False, split=False))  # type: ignore[arg-type]
    both = hybrid(0.0, document_concentration=0.0, **cfg)  # type: ignore[arg-type]
    s_words, s_both = words.new_state(), both.new_state()
    a_words: list[int] = []
    a_both: list[int] = []
    for i, b in enumerate(batches):
        a_words += words.partial_fit(b, s_words, np.random.default_rng(i)).assignments.tolist()
        a_both += both.partial_fit(b, s_both, np.random.default_rng(i)).assignments.tolist()
    assert partition(a_words) == partition(a_both)
    # and the words' statistics agree, cluster by cluster (the hybrid also holds the vectors)
    for u_w, u_b in dict(zip(a_words, a_both, strict=True)).items():
        kw, kb = s_words.slot_of(u_w), s_both.slot_of(u_b)
        assert s_words.mass(np.array([kw]))[0] == pytest.approx(s_both.mass(np.array([kb]))[0])
        ww, cw = s_words.word_counts(kw)
        wb, cb = both.term_weights(s_both, u_b)
        assert dict(zip(ww.tolist(), cw.tolist(), strict=True)) == pytest.approx(
            dict(zip(wb.tolist(), cb.tolist(), strict=True))
        )


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0, 2]), st.sampled_from([0.0, 0.5]))
def test_without_words_it_seats_as_the_vmf_model(seed: int, sweeps: int, discount: float) -> None:
    """Both under the uniform prior on the mean direction (their fitted priors differ: the vmf
    model's counts each cluster once, and they start from typical cosines 0.5 and 0.4)."""
    rng = np.random.default_rng(seed)
    batches = [make_batch(rng, 15, 0.0, 1.0) for _ in range(4)]
    cfg = dict(alpha=0.5, alpha_scaling="none", retire_min_mass=0.0, deterministic=True,
               discount=discount, rejuvenation_sweeps=sweeps, dimension=P, cosine=0.6,
               direction_prior=False)  # fmt: skip
    vmf = VMFMixture(VMFConfig(**cfg))  # type: ignore[arg-type]
    vmf.bind_dimension_words(list(range(0, 2 * P, 2)), list(range(1, 2 * P, 2)))
    both = hybrid(1.0, **cfg)  # type: ignore[arg-type]
    s_vmf, s_both = vmf.new_state(), both.new_state()
    for i, b in enumerate(batches):
        r_vmf = vmf.partial_fit(b, s_vmf, np.random.default_rng(i))
        r_both = both.partial_fit(b, s_both, np.random.default_rng(i))
        assert r_vmf.assignments.tolist() == r_both.assignments.tolist()
        assert [b[:2] for b in r_vmf.born] == [b[:2] for b in r_both.born]
        assert [b[2] for b in r_vmf.born] == pytest.approx([b[2] for b in r_both.born])
    assert state_digest(NamespaceState({}, s_vmf)) == state_digest(NamespaceState({}, s_both))


def test_a_document_without_a_vector_is_seated_by_its_words() -> None:
    """Two clusters the words cannot tell apart: the vector decides, unless there is none
    (under the uniform prior: three vectors give no stream direction to speak of)."""
    model = hybrid(1.0, cosine=0.9, rejuvenation_sweeps=0, direction_prior=False)
    stats = model.new_state()
    w = 2 * P
    emb = np.zeros((2, P))
    emb[0, 0] = emb[1, 1] = 1.0
    first = DocBatch(np.array([0, 1, 2]), np.array([w, w + 1]), np.array([1, 1]),
                     np.array([1, 1]), 2 * P + V, 2 * P, emb=emb)  # fmt: skip
    res = model.partial_fit(first, stats, np.random.default_rng(0))
    a, b = res.assignments.tolist()
    assert a < b
    # documents of both words, tied on words: one without a vector goes to the oldest cluster,
    # one whose vector is b's to b's, though the first one's words have made a heavier
    emb2 = np.zeros((2, P))
    emb2[1, 1] = 1.0
    second = DocBatch(np.array([0, 2, 4]), np.array([w, w + 1, w, w + 1]), np.ones(4, np.int64),
                      np.array([2, 2]), 2 * P + V, 2 * P, emb=emb2)  # fmt: skip
    res = model.partial_fit(second, stats, np.random.default_rng(1))
    assert res.assignments.tolist() == [a, b]


@pytest.mark.parametrize("half_life", [0.0, 40.0])
@pytest.mark.parametrize("merge", [False, True])
def test_deltas_replay_to_the_writer_state(half_life: float, merge: bool) -> None:
    rng = np.random.default_rng(3)
    model = hybrid(1.0, half_life_docs=half_life, retire_min_mass=0.3, deterministic=False,
                   merge=merge, merge_scope="all", alpha=2.0)  # fmt: skip
    stats, replica = model.new_state(), model.new_state()
    retired = merges = 0
    for i in range(8):
        res = model.partial_fit(make_batch(rng, 20, 0.9, 0.9), stats, np.random.default_rng(i))
        retired += len(res.retired)
        merges += len(res.merged)
        live = {int(u) for u in stats.uid[stats.active_slots()].tolist()}
        assert set(res.assignments.tolist()) <= live  # merged-away clusters are named no more
        assert {u for u, _, _ in res.born} <= live
        replay_delta(replica, res.delta, half_life, uncounted=model.uncounted_words)
    assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, stats))
    np.testing.assert_allclose(model.resultants(replica), model.resultants(stats), atol=1e-12)
    if half_life:
        assert retired > 0
    assert (merges > 0) == merge


def test_known_labels_are_kept() -> None:
    rng = np.random.default_rng(4)
    model = hybrid(0.5)
    stats = model.new_state()
    batch = make_batch(rng, 8)
    known = np.array([-1, 9, -1, 9, -1, -1, 9, -1])
    res = model.partial_fit(batch, stats, rng, known=known, pinned={9})
    assert [u for u, k in zip(res.assignments.tolist(), known, strict=True) if k >= 0] == [9] * 3


def test_the_default_weight_counts_the_vector_as_64_dimensions() -> None:
    assert HybridConfig(dimension=256).weight == 0.25
    assert HybridConfig(dimension=128).weight == 0.5
    assert HybridConfig(dimension=32).weight == 1.0
    assert HybridConfig(dimension=256, view_weight=0.0).weight == 0.0
    assert HybridConfig(dimension=256).cosine == 0.4


def test_config_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="view weight"):
        HybridConfig(dimension=8, view_weight=-1.0)
    model = hybrid(1.0)
    batch = make_batch(np.random.default_rng(0), 3)
    wrong = DocBatch(batch.ptr, batch.words, batch.counts, batch.lengths, batch.vocab_size,
                     batch.reserved, emb=np.zeros((3, P + 1)))  # fmt: skip
    with pytest.raises(ValueError, match="vectors"):
        model.partial_fit(wrong, model.new_state(), np.random.default_rng(0))


# ---- re-founding --------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.5, 1.0]))
def test_refound_test_equals_the_oracle_with_the_member_taken_out(seed: int, w: float) -> None:
    rng = np.random.default_rng(seed)
    model = hybrid(w, rejuvenation_sweeps=1, discount=0.5)
    stats = model.new_state()
    for _ in range(2):
        model.partial_fit(make_batch(rng, 12, 0.9, 0.8), stats, rng)
    batch = make_batch(rng, 8, 0.9, 0.8)
    res = model.partial_fit(batch, stats, rng)
    fits = model.refound_test(stats, batch)
    feats = model.member_features(batch)
    cfg = model.config
    res_k = model.resultants(stats)
    pseudo = model.vector_frame(stats, res_k).prior.pseudo  # the base measure's, if any
    kmax = stats.kmax
    for d, uid in enumerate(res.assignments.tolist()):
        ids, values = feats[d]
        # the oracle: dense statistics without the member, every weight from scratch
        k = stats.slot_of(uid)
        m = [float(stats.m[j] * stats.scale) if stats.alive[j] else 0.0 for j in range(kmax)]
        live = [bool(stats.alive[j]) for j in range(kmax)]
        n = []
        for j in range(kmax):
            counts = np.zeros(V)
            if live[j]:
                ws, cs = model.term_weights(stats, int(stats.uid[j]))
                counts[ws - 2 * P] = cs
            n.append(counts)
        r = [res_k[j] + pseudo if live[j] and pseudo is not None else res_k[j] for j in range(kmax)]
        words, cw = batch.doc(d)
        xw = np.zeros(V)
        xw[words - 2 * P] = cw
        dims = ids[ids < 2 * P]
        x = np.zeros(P)
        x[dims // 2] = np.where(dims % 2 == 0, 1.0, -1.0) * values[ids < 2 * P] / 2.0**20
        vec = x if x.any() else None
        if m[k] - 1.0 <= 0.0:
            assert fits(uid, ids, values)
            continue
        m[k] -= 1.0
        n[k] = n[k] - xw
        if vec is not None:
            r[k] = r[k] - vec
        s, new = oracle_weights(xw, vec, m, n, r, live, cfg, batch.n_words * cfg.beta,
                                model.log_alpha(len(batch)), pseudo)  # fmt: skip
        others = [j for j in range(kmax) if live[j] and j != k]
        expected = s[k] > new + kern.TIE_TOL and all(
            s[j] < s[k] - kern.TIE_TOL or (s[j] <= s[k] + kern.TIE_TOL and stats.uid[j] > uid)
            for j in others
        )
        assert fits(uid, ids, values) == expected


def test_a_stray_member_no_longer_fits_its_cluster() -> None:
    rng = np.random.default_rng(0)
    model = hybrid(1.0, cosine=0.8)
    # one story (words 0–5, vectors near e0) whose first member is a stray: other words, and a
    # vector far from the story's
    docs = [[2 * P + V - 1, 2 * P + V - 2]] + [
        (2 * P + rng.choice(6, 4)).tolist() for _ in range(8)
    ]
    emb = np.eye(P)[0] + 0.3 * rng.standard_normal((9, P))
    emb[0] = -np.ones(P)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    batch = DocBatch.from_docs(docs, 2 * P + V)
    batch = DocBatch(batch.ptr, batch.words, batch.counts, batch.lengths, 2 * P + V, 2 * P,
                     emb=emb)  # fmt: skip
    stats = model.new_state()
    res = model.partial_fit(batch, stats, rng, known=np.full(9, 5))  # all in one cluster
    assert res.assignments.tolist() == [5] * 9
    fits = model.refound_test(stats, batch)
    feats = model.member_features(batch)
    assert not fits(5, *feats[0])  # the stray would open its own cluster
    assert all(fits(5, *feats[d]) for d in range(1, 9))  # the story's members sit back


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_vector_merge_gain_is_the_chain_rule_of_the_predictive(seed: int) -> None:
    """log p(X_a ∪ X_b) − log p(X_a) − log p(X_b), each marginal the product of the collapsed
    predictive of its vectors one at a time (from the uniform density for the first)."""
    rng = np.random.default_rng(seed)
    model = hybrid(1.0, rejuvenation_sweeps=0, direction_prior=False)
    stats = model.new_state()
    batch = make_batch(rng, 12, 0.0, 1.0)
    known = np.arange(12) % 3
    model.partial_fit(batch, stats, rng, known=known)
    assert batch.emb is not None
    cfg = model.config
    logc = vkern.log_vmf_normalizer

    def marginal(xs: np.ndarray) -> float:
        r, total = np.zeros(P), 0.0
        for x in xs:
            before = float(np.linalg.norm(r))
            r = r + x
            if before == 0.0:
                total += vkern.log_sphere_density_at_zero(P)
            else:
                total += (logc(P, cfg.kappa) + logc(P, cfg.kappa * before)
                          - logc(P, cfg.kappa * float(np.linalg.norm(r))))  # fmt: skip
        return total

    slots = np.array([stats.slot_of(u) for u in range(3)])
    gains = model.vector_merge_gains(stats, slots[:1])
    for b in (1, 2):
        xa, xb = batch.emb[known == 0], batch.emb[known == b]
        ref = marginal(np.vstack([xa, xb])) - marginal(xa) - marginal(xb)
        assert gains[0, slots[b]] == pytest.approx(ref, rel=1e-9, abs=1e-9)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.25, 1.0]))
def test_predict_is_the_first_seating_of_each_document_alone(seed: int, w: float) -> None:
    rng = np.random.default_rng(seed)
    model = hybrid(w)
    stats = model.new_state()
    for _ in range(2):
        model.partial_fit(make_batch(rng, 12, 0.9, 0.8), stats, rng)
    batch = make_batch(rng, 6, 0.8, 0.7)
    got = model.predict(batch, stats)
    frame = model.vector_frame(stats, model.resultants(stats))  # what predict scores under
    assert batch.emb is not None
    for d in range(len(batch)):
        w_d, c_d = batch.doc(d)
        one = DocBatch(np.array([0, w_d.shape[0]]), w_d, c_d, batch.lengths[d : d + 1],
                       batch.vocab_size, batch.reserved, emb=batch.emb[d : d + 1])  # fmt: skip
        assign, _, _ = run_kernel(model, stats, one, 0, prior=frame.prior)
        k = int(assign[0])
        assert got[d] == (int(stats.uid[k]) if k < stats.kmax else -1)


def _story(rng: np.random.Generator, topic: int, n: int) -> tuple[list[list[int]], np.ndarray]:
    """``n`` documents of one story: words of its own block, vectors near its own axis."""
    words = [(2 * P + topic * 8 + rng.integers(0, 8, size=6)).tolist() for _ in range(n)]
    x = np.eye(P)[2 * topic] + 0.2 * rng.standard_normal((n, P))
    return words, x / np.linalg.norm(x, axis=1, keepdims=True)


def _batch(parts: list[tuple[list[list[int]], np.ndarray]]) -> DocBatch:
    docs = [d for w, _ in parts for d in w]
    b = DocBatch.from_docs(docs, 2 * P + V)
    emb = np.concatenate([x for _, x in parts])
    return DocBatch(b.ptr, b.words, b.counts, b.lengths, 2 * P + V, 2 * P, emb=emb)


@pytest.mark.parametrize("margin", [20.0, 1e9])
def test_an_unlabelled_twin_is_absorbed_into_its_known_category(margin: float) -> None:
    """Story A's first documents come unlabelled and open a twin; once its labelled documents
    fill the known category the twin is absorbed (both views agree), story B never is; with an
    enormous margin nothing is. The writer equals a replay of its deltas. (Under the uniform
    prior: the 20-nat margin is set for its gains.)"""
    from noveld.daemon.pipeline import label_uid

    rng = np.random.default_rng(5)
    model = hybrid(1.0, absorb_margin=margin, split=False, alpha=0.3, direction_prior=False)
    stats, replica = model.new_state(), model.new_state()
    known_a = label_uid("a")
    pinned = frozenset({known_a})
    first = model.partial_fit(_batch([_story(rng, 0, 8), _story(rng, 1, 8)]), stats, rng,
                              None, pinned)  # fmt: skip
    replay_delta(replica, first.delta, 0.0, uncounted=model.uncounted_words)
    twin, b_cluster = int(first.assignments[0]), int(first.assignments[8])
    assert twin != b_cluster
    known = np.full(10, -1, dtype=np.int64)
    known[:6] = known_a
    second = model.partial_fit(_batch([_story(rng, 0, 10)]), stats, rng, known, pinned)
    replay_delta(replica, second.delta, 0.0, uncounted=model.uncounted_words)
    merged = {(s, d) for s, d, _ in second.merged}
    live = set(stats.uid[stats.active_slots()].tolist())
    assert b_cluster in live and all(s != b_cluster for s, _ in merged)
    if margin < 1e6:
        assert (twin, known_a) in merged and twin not in live
        assert set(second.assignments.tolist()) == {known_a}
    else:
        assert not merged and twin in live
    assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, stats))
    np.testing.assert_allclose(model.resultants(replica), model.resultants(stats), atol=1e-12)


def test_length_tempering_counts_a_document_as_n_1_plus_s_over_n_plus_s_words() -> None:
    """τ = (1 + s)/(n + s): 1 for one token, n·τ grows toward 1 + s, s = 0 leaves every
    document untempered."""
    from noveld.models.kernels.tempering import length_tempering

    n = np.array([0.0, 1.0, 6.0, 100.0, 900.0, 1e6])
    tau = length_tempering(n, 15.0)
    assert tau[0] == tau[1] == 1.0
    np.testing.assert_allclose(tau[2:], 16.0 / (n[2:] + 15.0))
    effective = n[1:] * tau[1:]
    assert np.all(np.diff(effective) > 0) and effective[-1] < 16.0
    assert np.all(length_tempering(n, 0.0) == 1.0)
    assert HybridConfig(dimension=8).document_concentration == 15.0
    with pytest.raises(ValueError, match="document concentration"):
        HybridConfig(dimension=8, document_concentration=-1.0)
