"""The `svi` model: special functions and stick expectations against scipy, the local step's
objective, the natural-gradient step's algebra, and replay of its deltas."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.dpmm_oracle import random_docs
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import digamma as sp_digamma

from noveld.models.base import DocBatch
from noveld.models.dpmm import replay_delta
from noveld.models.kernels import variational as vkern
from noveld.models.suffstats import MultinomialStats
from noveld.models.svi import SVI, SVIConfig, step_size
from noveld.state.base import NamespaceState, state_digest


@settings(deadline=None)  # the first call compiles the kernel
@given(st.floats(1e-6, 1e6))
def test_digamma_matches_scipy(x: float) -> None:
    assert vkern.digamma(x) == pytest.approx(float(sp_digamma(x)), rel=1e-10, abs=1e-10)


def sticks_oracle(m: np.ndarray, alpha: float) -> tuple[np.ndarray, float]:
    out = np.empty(m.shape[0])
    prefix = 0.0
    for k in range(m.shape[0]):
        a, b = 1.0 + m[k], alpha + float(m[k + 1 :].sum())
        out[k] = prefix + sp_digamma(a) - sp_digamma(a + b)
        prefix += sp_digamma(b) - sp_digamma(a + b)
    return out, prefix + float(sp_digamma(2.0) - sp_digamma(2.0 + alpha))


@settings(deadline=None)
@given(st.lists(st.floats(0.0, 500.0), min_size=0, max_size=12), st.floats(0.01, 5.0))
def test_expected_log_sticks_match_the_beta_posterior(m: list[float], alpha: float) -> None:
    arr = np.array(m)
    out = np.empty(arr.shape[0])
    new = vkern.expected_log_sticks(arr, alpha, out)
    ref, ref_new = sticks_oracle(arr, alpha)
    np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-9)
    assert new == pytest.approx(ref_new, rel=1e-9, abs=1e-9)
    # E[π] sums to at most 1: Σ exp(E log π) ≤ Σ E π ≤ 1 by Jensen
    assert float(np.exp(out).sum()) <= 1.0 + 1e-9


def fitted(seed: int, **kw: float | str) -> tuple[SVI, MultinomialStats]:
    rng = np.random.default_rng(seed)
    model = SVI(SVIConfig(alpha=0.5, beta=0.1, alpha_scaling="none", retire_min_mass=0.0, **kw))  # type: ignore[arg-type]
    stats = model.new_state()
    for _ in range(4):
        model.partial_fit(DocBatch.from_docs(random_docs(rng, 15, 30), 30), stats, rng)
    return model, stats


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 2.0, 15.0]))
def test_variational_scores_equal_the_dense_expectation(seed: int, conc: float) -> None:
    """vs_k = E[log π_k] + τ Σ_w N_dw (ψ(β + s_kw) − ψ(Vβ + n_k)) for every live component,
    τ = (1 + s)/(n + s) the length tempering (s = 0: τ = 1)."""
    _, stats = fitted(seed, document_concentration=conc)
    vocab, beta = 30, 0.1
    rng = np.random.default_rng(seed + 1)
    doc = DocBatch.from_docs(random_docs(rng, 1, vocab, max_len=24), vocab)
    w, c = doc.doc(0)
    n = float(c.sum())
    tau = min(1.0, (1 + conc) / (n + conc)) if conc > 0 else 1.0
    elogpi = rng.normal(-3, 1, stats.m.shape[0])
    vs = np.empty(stats.m.shape[0])
    vkern.variational_scores(
        w,
        c,
        int(c.sum()),
        vs,
        elogpi,
        stats.ntok,
        stats.alive,
        stats.head,
        stats.nxt,
        stats.pk,
        stats.pc,
        stats.kmax,
        stats.scale,
        beta,
        vocab * beta,
        tau,
    )
    for k in stats.active_slots().tolist():
        ws, cs = stats.word_counts(k)
        s = np.zeros(vocab)
        s[ws] = cs
        n_k = float(stats.ntok[k] * stats.scale)
        expected = elogpi[k] + tau * float(
            np.sum(c * (sp_digamma(beta + s[w]) - sp_digamma(vocab * beta + n_k)))
        )
        assert vs[k] == pytest.approx(expected, rel=1e-9, abs=1e-8)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_the_vb_local_step_maximises_the_local_elbo(seed: int) -> None:
    """For fixed global parameters, r ∝ exp(scores) maximises Σ_k r_k·score_k − r_k log r_k
    (the document's ELBO terms in q(z)); any other distribution scores no higher."""
    _, stats = fitted(seed)
    rng = np.random.default_rng(seed)
    doc = DocBatch.from_docs(random_docs(rng, 1, 30), 30)
    w, c = doc.doc(0)
    vs = np.empty(stats.m.shape[0])
    vkern.variational_scores(
        w,
        c,
        int(c.sum()),
        vs,
        np.zeros(stats.m.shape[0]),
        stats.ntok,
        stats.alive,
        stats.head,
        stats.nxt,
        stats.pk,
        stats.pc,
        stats.kmax,
        stats.scale,
        0.1,
        3.0,
    )
    live = stats.active_slots()
    score = vs[live]

    def local_elbo(r: np.ndarray) -> float:
        nz = r > 0
        return float(np.sum(r * score) - np.sum(r[nz] * np.log(r[nz])))

    best = np.exp(score - score.max())
    best /= best.sum()
    for _ in range(20):
        other = rng.dirichlet(np.ones(live.shape[0]))
        assert local_elbo(best) >= local_elbo(other) - 1e-9
    assert local_elbo(best) == pytest.approx(
        float(np.log(np.exp(score - score.max()).sum()) + score.max()), rel=1e-9
    )


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["cvb0", "vb"]))
def test_natural_gradient_step_algebra(seed: int, local_step: str) -> None:
    """Σ_k m_k after a step = (1−ρ)·Σ_k m_k before + ρ·D/|B|·|B| (each document's r sums to 1),
    and the same for tokens; D = documents seen."""
    model, stats = fitted(seed, local_step=local_step, merge=False)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    batch = DocBatch.from_docs(random_docs(rng, 12, 30), 30)
    m0 = float(stats.mass(stats.active_slots()).sum())
    n0 = float((stats.ntok[stats.active_slots()] * stats.scale).sum())
    t = int(stats.ictl[5]) + 1
    rho = step_size(t, 1.0, 0.8)
    corpus = float(stats.ictl[4] + 12)
    res = model.partial_fit(batch, stats, rng)
    assert res.extra["rho"] == pytest.approx(rho)
    m1 = float(stats.mass(stats.active_slots()).sum())
    n1 = float((stats.ntok[stats.active_slots()] * stats.scale).sum())
    assert m1 == pytest.approx((1 - rho) * m0 + rho * corpus, rel=1e-9)
    assert n1 == pytest.approx(
        (1 - rho) * n0 + rho * corpus / 12 * float(batch.lengths.sum()), rel=1e-9
    )


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0, 2]), st.sampled_from([0.0, 15.0]))
def test_svi_deltas_replay_to_exactly_the_writer_state(seed: int, sweeps: int, conc: float) -> None:
    """Also with the length tempering: it changes the responsibilities, never the counts a
    document adds, so the step stays a replayable delta."""
    rng = np.random.default_rng(seed)
    model = SVI(SVIConfig(alpha=0.5, beta=0.1, alpha_scaling="none", retire_min_mass=0.3,
                          rejuvenation_sweeps=sweeps, document_concentration=conc))  # fmt: skip
    stats, replica = model.new_state(), model.new_state()
    for _ in range(8):
        res = model.partial_fit(DocBatch.from_docs(random_docs(rng, 15, 30), 30), stats, rng)
        replay_delta(replica, res.delta, 0.0)
    assert int(replica.ictl[5]) == int(stats.ictl[5]) == 8  # the step counter t
    # components a sweep emptied were dropped, not left alive with nothing in them
    assert np.all(stats.mass(stats.active_slots()) > 0)
    # the writer applies its own step through the replay code: bit-exact, fractional counts too
    assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, stats))


def test_same_seed_same_state() -> None:
    digests = []
    for _ in range(2):
        _, stats = fitted(7)
        digests.append(state_digest(NamespaceState({}, stats)))
    assert digests[0] == digests[1]


def test_step_size_schedule() -> None:
    assert step_size(1, 1.0, 0.8) == pytest.approx(2**-0.8)
    assert step_size(100, 1.0, 0.8) < step_size(10, 1.0, 0.8)
    with pytest.raises(ValueError):
        SVIConfig(kappa=0.5)
    assert math.isfinite(step_size(10**9, 0.0, 1.0))


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_hardening_moves_each_document_wholly_to_its_top_component(seed: int) -> None:
    """After ``harden_responsibilities`` the pool holds exactly what adding each document
    with weight 1 to its most responsible component gives (forced documents untouched)."""
    _, stats = fitted(seed, split=False)
    rng = np.random.default_rng(seed)
    batch = DocBatch.from_docs(random_docs(rng, 10, 30), 30)
    slots = stats.active_slots()
    nb, top = len(batch), 3
    r_slot = np.full((nb, top), -1, dtype=np.int64)
    r_val = np.zeros((nb, top))
    for d in range(nb):
        k = rng.choice(slots, size=min(top, slots.shape[0]), replace=False)
        r = rng.dirichlet(np.ones(k.shape[0]))
        order = np.argsort(-r)
        r_slot[d, : k.shape[0]], r_val[d, : k.shape[0]] = k[order], r[order]
    forced = np.full(nb, -1, dtype=np.int64)
    forced[0] = r_slot[0, 0]  # a labelled document keeps what it has
    r_slot[0, 1:], r_val[0] = -1, [1.0, 0.0, 0.0]
    expected = {int(k): dict(zip(*stats.word_counts(int(k)), strict=True)) for k in slots}
    for d in range(nb):  # the soft provisional additions, and the hard reference
        w, c = batch.doc(d)
        for t in range(top):
            if r_slot[d, t] >= 0:
                vkern.add_document(
                    int(r_slot[d, t]), w, c, int(batch.lengths[d]), r_val[d, t] / stats.scale,
                    stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, stats.ictl,
                )  # fmt: skip
        ref = expected[int(r_slot[d, 0])]
        for word, cnt in zip(w.tolist(), c.tolist(), strict=True):
            ref[word] = ref.get(word, 0.0) + cnt
    vkern.harden_responsibilities(
        batch.ptr, batch.words, batch.counts, batch.lengths, r_slot, r_val, forced, stats.scale,
        stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, stats.ictl,
    )  # fmt: skip
    assert np.all(r_slot[:, 1:] == -1) and np.all(r_val[:, 0] == 1.0)
    for k in slots.tolist():
        ws, cs = stats.word_counts(k)
        got = {w: c for w, c in zip(ws.tolist(), cs.tolist(), strict=True) if abs(c) > 1e-9}
        want = {w: c for w, c in expected[k].items() if abs(c) > 1e-9}
        assert got.keys() == want.keys()
        for w in got:
            assert got[w] == pytest.approx(want[w], abs=1e-9)
