"""The vector view's base measure: a vMF prior on a cluster's mean direction around the stream's
mean direction, fitted to the stream. It keeps long documents, whose vectors share a large
component, in their stories where the uniform prior seats them all in one cluster."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.hybrid_oracle import P, hybrid, make_batch, oracle_seat, run_kernel
from helpers.long_vectors import long_documents, seat
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.eval.metrics import clustering_scores
from noveld.models.direction_prior import DirectionPrior, typical_cosine
from noveld.models.hybrid_prior import VectorFrame
from noveld.models.kernels import vmf as vkern


def clusters_around(
    rng: np.random.Generator, mu0: np.ndarray, a0: float, rho: float, k: int, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Resultants and masses of ``k`` clusters of ``n`` unit vectors each: every cluster's mean
    direction at cosine ``a0`` from ``mu0``, its members at cosine ``rho`` from it."""
    p = mu0.shape[0]
    r, mass = np.zeros((k + 1, p)), np.full(k + 1, float(n))
    mass[k] = 0.0  # a dead slot, ignored
    r[k] = 100.0
    for j in range(k):
        u = rng.standard_normal(p)
        u -= (u @ mu0) * mu0
        m = a0 * mu0 + np.sqrt(1 - a0 * a0) * u / np.linalg.norm(u)
        for _ in range(n):
            v = rng.standard_normal(p)
            v -= (v @ m) * m
            r[j] += rho * m + np.sqrt(1 - rho * rho) * v / np.linalg.norm(v)
    return r, mass


@pytest.mark.parametrize(("p", "a0", "rho"), [(64, 0.8, 0.6), (256, 0.5, 0.65), (384, 0.7, 0.5)])
def test_the_fitted_prior_recovers_the_direction_and_strength(
    p: int, a0: float, rho: float
) -> None:
    """μ₀ is the clusters' common direction, ρ their members' cosine, and a = κ(A₀)/κ(ρ) by eq. 10
    at the generating cosines (within 15 %: A₀ is read from the clusters' mean vector)."""
    rng = np.random.default_rng(p)
    mu0 = rng.standard_normal(p)
    mu0 /= np.linalg.norm(mu0)
    r, mass = clusters_around(rng, mu0, a0, rho, 100, 20)
    assert typical_cosine(r, mass, 0.4, a0 * rho) == pytest.approx(rho, abs=0.02)
    prior = DirectionPrior.fitted(r, mass, None, 0.4)
    assert prior.pseudo is not None
    assert prior.pseudo @ mu0 / prior.strength > 0.98
    want = vkern.kappa_from_cosine(a0, p) / vkern.kappa_from_cosine(rho, p)
    assert prior.strength == pytest.approx(want, rel=0.15)


def test_no_vector_no_prior_and_the_frame_adds_it_to_live_clusters_only() -> None:
    """Without any vector the prior is the uniform one; a frame adds a·μ₀ to the resultants of
    live clusters and opens a new slot with it."""
    assert DirectionPrior.fitted(np.zeros((2, 3)), np.zeros(2), None, 0.4).pseudo is None
    prior = DirectionPrior(np.array([0.0, 2.0, 0.0]))
    r = np.ones((2, 3))
    got = prior.resultants(r, np.array([1.0, 0.0]))
    np.testing.assert_array_equal(got, [[1.0, 3.0, 1.0], [1.0, 1.0, 1.0]])
    rn2, dots = prior.new_slot(np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]]))
    assert rn2 == 4.0 and dots.tolist() == [2.0, 0.0]
    assert DirectionPrior(None).new_slot(np.ones((2, 3)))[1].tolist() == [0.0, 0.0]


@settings(max_examples=30, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from([0.5, 1.0]),
    st.sampled_from([0, 2]),
    st.sampled_from([0.5, 3.0]),
)
def test_seating_under_the_prior_equals_the_dense_oracle(
    seed: int, w: float, sweeps: int, a: float
) -> None:
    """The kernel with the pseudo-resultant a·μ₀ in every existing and new slot, against the
    oracle that adds it to dense resultants and scores the new cluster as one of resultant
    a·μ₀: the same seats, log normalisers and margins within 1e-9."""
    rng = np.random.default_rng(seed)
    model = hybrid(w, rejuvenation_sweeps=1, direction_prior=False)
    stats = model.new_state()
    for _ in range(2):
        model.partial_fit(make_batch(rng, 12, 0.9, 0.8), stats, rng)
    batch = make_batch(rng, 10, 0.8, 0.7)
    mu0 = rng.standard_normal(P)
    prior = DirectionPrior(a * mu0 / np.linalg.norm(mu0))
    assign, log_norm, margin = run_kernel(model, stats, batch, sweeps, prior=prior)
    ref, ref_norm, ref_margin, _ = oracle_seat(model, stats, batch, sweeps, prior=prior.pseudo)
    assert assign.tolist() == ref
    np.testing.assert_allclose(log_norm, ref_norm, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(margin, ref_margin, rtol=1e-9, atol=1e-9)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_vector_merge_gain_under_the_prior_is_the_chain_rule(seed: int) -> None:
    """log p(X_a ∪ X_b) − log p(X_a) − log p(X_b), each marginal the product of the collapsed
    predictive of its vectors one at a time, starting from the resultant a·μ₀ (the vectors
    share a direction, so that the fitted prior is not the uniform one)."""
    rng = np.random.default_rng(seed)
    model = hybrid(1.0, rejuvenation_sweeps=0)
    stats = model.new_state()
    batch = make_batch(rng, 12, 0.0, 1.0)
    assert batch.emb is not None
    shared = batch.emb + np.eye(P)[P - 1]
    batch.emb[:] = shared / np.linalg.norm(shared, axis=1, keepdims=True)
    known = np.arange(12) % 3
    model.partial_fit(batch, stats, rng, known=known)
    assert batch.emb is not None
    frame = model.vector_frame(stats, model.resultants(stats))
    pseudo = frame.prior.pseudo
    assert pseudo is not None and frame.prior.strength > 0.0
    kappa = model.kappa
    logc = vkern.log_vmf_normalizer

    def marginal(xs: np.ndarray) -> float:
        r, total = pseudo.copy(), 0.0
        for x in xs:
            before = float(np.linalg.norm(r))
            r = r + x
            total += (
                logc(P, kappa) + logc(P, kappa * before) - logc(P, kappa * float(np.linalg.norm(r)))
            )
        return total

    slots = np.array([stats.slot_of(u) for u in range(3)])
    gains = model.vector_merge_gains(stats, slots[:1])
    for b in (1, 2):
        xa, xb = batch.emb[known == 0], batch.emb[known == b]
        ref = marginal(np.vstack([xa, xb])) - marginal(xa) - marginal(xb)
        assert gains[0, slots[b]] == pytest.approx(ref, rel=1e-9, abs=1e-9)


def test_the_prior_keeps_documents_that_share_a_direction_in_their_stories() -> None:
    """Vectors that share one large component (their stories' members at cosine ~0.83 from
    their mean), scored at that cosine: under the uniform prior one cluster takes them all;
    under the fitted prior (the default) they keep their stories, raw."""
    batch, labels = long_documents(np.random.default_rng(3), stories=8, docs=320)
    uniform = clustering_scores(labels, seat(batch, False, prior=False, cosine=0.8))["nmi"]
    fitted = clustering_scores(labels, seat(batch, False, prior=True, cosine=0.8))["nmi"]
    assert fitted >= 0.8 and uniform <= 0.1, (fitted, uniform)


def test_centring_replaces_the_prior() -> None:
    """Centred vectors have no common direction left: the frame then has no prior."""
    model = hybrid(1.0, centre=True)
    stats = model.new_state()
    rng = np.random.default_rng(0)
    model.partial_fit(make_batch(rng, 12, 0.5, 1.0), stats, rng)
    frame = VectorFrame.of(stats, model.resultants(stats), True, 0.4)
    assert frame.prior.pseudo is None and frame.centring.mean is not None
