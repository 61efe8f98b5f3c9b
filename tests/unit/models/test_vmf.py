"""The vMF likelihood: log Bessel against scipy, the collapsed predictive is a density, the seating
kernel against a from-scratch numpy oracle, and the model's deltas, forgetting, known labels,
re-founding and quality on a synthetic embedding stream."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.vmf_oracle import oracle_scores, oracle_seat, run_kernel, unit_rows
from helpers.vmf_streams import emb_batch, model_and_batches, synthetic
from hypothesis import example, given, settings
from hypothesis import strategies as st
from scipy.special import ive as sp_ive

from noveld.eval.metrics import clustering_scores
from noveld.models.base import DocBatch
from noveld.models.dpmm import replay_delta
from noveld.models.kernels import vmf as vkern
from noveld.models.suffstats import MultinomialStats
from noveld.models.vmf import VMFConfig, VMFMixture
from noveld.state.base import NamespaceState, state_digest
from noveld.synth import sample_vmf


# ---- special functions ---------------------------------------------------------------------
@settings(deadline=None, max_examples=300)
@given(st.floats(0.0, 2000.0), st.floats(1e-6, 1e5))
@example(nu=14.999, x=225.0)  # each side of every switch between the three expansions
@example(nu=15.0, x=225.0)
@example(nu=3.0, x=30.0)
@example(nu=3.0, x=30.001)
@example(nu=0.0, x=1e-6)
def test_log_bessel_matches_scipy(nu: float, x: float) -> None:
    ref = math.log(float(sp_ive(nu, x))) + x if sp_ive(nu, x) > 0 else -math.inf
    if not math.isfinite(ref):
        return  # scipy underflows (tiny x, huge ν); nothing to compare with
    got = vkern.log_bessel_iv(nu, x)
    assert got == pytest.approx(ref, rel=1e-8, abs=1e-8)


def test_log_bessel_at_zero() -> None:
    assert vkern.log_bessel_iv(0.0, 0.0) == 0.0  # I_0(0) = 1
    assert vkern.log_bessel_iv(2.5, 0.0) == -math.inf


@pytest.mark.parametrize("p", [2, 3, 5, 16, 384])
def test_normalizer_tends_to_the_uniform_density(p: int) -> None:
    log_area = math.log(2) + p / 2 * math.log(math.pi) - math.lgamma(p / 2)
    assert vkern.log_sphere_density_at_zero(p) == pytest.approx(-log_area, rel=1e-12)
    assert vkern.log_vmf_normalizer(p, 1e-6) == pytest.approx(-log_area, abs=1e-6)


def test_normalizer_closed_form_on_the_2_sphere() -> None:
    for kappa in (0.01, 1.0, 7.5, 300.0):
        ref = math.log(kappa) - math.log(4 * math.pi) - (kappa + math.log1p(-math.exp(-2 * kappa)))
        ref += math.log(2.0)  # C_3(κ) = κ / (4π sinh κ) = 2κ e^{−κ} / (4π (1 − e^{−2κ}))
        assert vkern.log_vmf_normalizer(3, kappa) == pytest.approx(ref, rel=1e-10)


def test_kappa_from_cosine_is_paper_003_eq_10() -> None:
    assert vkern.kappa_from_cosine(0.5, 100) == pytest.approx((50 - 0.125) / 0.75)
    with pytest.raises(ValueError):
        vkern.kappa_from_cosine(1.0, 10)
    # and it inverts: the mean cosine of draws from vMF(μ, κ) to μ is about the asked cosine
    rng = np.random.default_rng(0)
    p, c = 64, 0.6
    mu = np.zeros((4000, p))
    mu[:, 0] = 1.0
    x = sample_vmf(mu, vkern.kappa_from_cosine(c, p), rng)
    assert float(x[:, 0].mean()) == pytest.approx(c, abs=0.02)
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-12)


@pytest.mark.parametrize("p", [3, 5, 8])
@pytest.mark.parametrize("n_members", [0, 1, 4])
def test_the_collapsed_predictive_is_a_density(p: int, n_members: int) -> None:
    """∫ p(x | r) dx = 1 over the sphere: the density depends on x only through t = x·r/‖r‖,
    so the integral is ∫ p(t) · area(S^{p−2}) · (1 − t²)^{(p−3)/2} dt."""
    kappa = 6.0
    rn = n_members * 0.8  # ‖r‖ of n members around one direction
    t = np.linspace(-1.0, 1.0, 200_001)
    r_new = np.sqrt(np.maximum(rn * rn + 2 * rn * t + 1.0, 0.0))
    logc = np.vectorize(lambda y: vkern.log_vmf_normalizer(p, float(y)))
    log_dens = vkern.log_vmf_normalizer(p, kappa) + logc(kappa * rn) - logc(kappa * r_new)
    q = p - 1
    ring = 2 * math.pi ** (q / 2) / math.gamma(q / 2)
    integrand = np.exp(log_dens) * ring * (1 - t * t) ** ((p - 3) / 2)
    assert float(np.trapezoid(integrand, t)) == pytest.approx(1.0, abs=2e-4)


# ---- seating kernel ------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(2, 12),
    st.integers(0, 5),
    st.sampled_from([0, 2]),
    st.sampled_from([0.0, 0.5]),
)
def test_seating_kernel_equals_the_dense_oracle(
    seed: int, p: int, k0: int, sweeps: int, d: float
) -> None:
    rng = np.random.default_rng(seed)
    # a few directions with members around them, and a batch drawn near them or anywhere
    centres = unit_rows(rng, 3, p)
    kappa = vkern.kappa_from_cosine(0.7, p)
    r0 = np.zeros((k0, p))
    mass0 = np.zeros(k0)
    for k in range(k0):
        n = int(rng.integers(1, 6))
        r0[k] = sample_vmf(np.repeat(centres[k % 3][None], n, 0), kappa, rng).sum(0)
        mass0[k] = n * float(rng.uniform(0.5, 1.0))  # decayed masses are fractional
    x = np.concatenate([sample_vmf(centres[rng.integers(0, 3, 6)], kappa, rng),
                        unit_rows(rng, 3, p)])  # fmt: skip
    log_a = math.log(0.5)
    assign, log_norm, margin, _, _ = run_kernel(x, mass0, r0, kappa, d, log_a, sweeps)
    ref_assign, ref_norm, ref_margin = oracle_seat(x, mass0, r0, kappa, d, log_a, sweeps)
    assert assign.tolist() == ref_assign
    np.testing.assert_allclose(log_norm, ref_norm, rtol=1e-9, atol=1e-9)
    finite = np.isfinite(ref_margin)
    np.testing.assert_allclose(margin[finite], np.array(ref_margin)[finite], rtol=1e-9, atol=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 40))
def test_add_then_remove_restores_the_cluster(seed: int, p: int) -> None:
    rng = np.random.default_rng(seed)
    x = unit_rows(rng, 5, p)
    r = unit_rows(rng, 1, p)[0] * 2.5
    mass = np.array([3.7, 0.0])
    rn2 = np.array([float(r @ r), 0.0])
    dots = np.zeros((5, 2))
    dots[:, 0] = x @ r
    logc = np.array([vkern.log_vmf_normalizer(p, 10.0 * math.sqrt(rn2[0])), 0.0])
    before = (mass.copy(), rn2.copy(), dots.copy(), logc.copy())
    gram = x @ x.T
    vkern._move(2, 0, 1.0, mass, rn2, logc, dots, gram, p, 10.0)
    # the kernel's running ‖r‖² and r·x equal the recomputed ones
    assert rn2[0] == pytest.approx(float(np.sum((r + x[2]) ** 2)), rel=1e-12)
    np.testing.assert_allclose(dots[:, 0], x @ (r + x[2]), rtol=1e-12, atol=1e-12)
    vkern._move(2, 0, -1.0, mass, rn2, logc, dots, gram, p, 10.0)
    for a, b in zip((mass, rn2, dots, logc), before, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000))
def test_sampled_seating_probabilities_sum_to_one(seed: int) -> None:
    """The normaliser the kernel samples with is the sum of its weights: exp(score − log_norm)
    over every live cluster and a new one adds to 1 (first pass, against fixed clusters)."""
    rng = np.random.default_rng(seed)
    p = 6
    r0 = unit_rows(rng, 4, p) * rng.uniform(0.5, 3.0, (4, 1))
    mass0 = rng.uniform(1.0, 4.0, 4)
    x = unit_rows(rng, 1, p)
    _, log_norm, _, _, _ = run_kernel(x, mass0, r0, 8.0, 0.5, 0.0, 0, deterministic=False)
    s, new = oracle_scores(x[0], mass0, r0, p, 8.0, 0.5, 0.0)
    assert float(np.exp(np.append(s, new) - log_norm[0]).sum()) == pytest.approx(1.0, rel=1e-12)


def test_forced_documents_stay_where_they_are_put() -> None:
    rng = np.random.default_rng(1)
    p = 8
    x = unit_rows(rng, 6, p)
    forced = np.array([-1, 0, -1, 0, -1, -1], dtype=np.int64)
    # slot 0 is an empty known category: only the forced documents may sit there
    assign, *_ = run_kernel(x, np.zeros(1), np.zeros((1, p)), 30.0, 0.5, 0.0, 2, forced)
    assert assign[1] == assign[3] == 0
    # before the first forced document, slot 0 has no mass: document 0 cannot sit there
    assert assign[0] != 0


def test_gather_resultants_reads_both_signs() -> None:
    stats = MultinomialStats()
    model = VMFMixture(VMFConfig(dimension=3, alpha=1.0, alpha_scaling="none", cosine=0.9))
    model.bind_dimension_words([10, 11, 12], [13, 14, 15])
    x = np.array([[0.6, -0.8, 0.0], [0.0, 0.6, -0.8]])
    batch = emb_batch(x, 16)
    res = model.partial_fit(batch, stats, np.random.default_rng(0), known=np.array([7, 7]))
    assert res.assignments.tolist() == [7, 7]
    k = int(np.flatnonzero(stats.uid[: stats.kmax] == 7)[0])
    np.testing.assert_allclose(model.resultants(stats)[k], x.sum(0), atol=1e-15)


# ---- the model -----------------------------------------------------------------------------


def test_clusters_a_synthetic_embedding_stream() -> None:
    """Under the fitted prior on the mean direction (the default): the generator's stories'
    directions are uniform on the sphere and its stream opens with one story that keeps half
    the documents, which the prior counts as one cluster's direction, not a shared one."""
    embs, labels = synthetic(1500, 64, 0.6)
    model, batches = model_and_batches(embs, cosine=0.5, deterministic=True)
    stats = model.new_state()
    preds: list[int] = []
    for i, b in enumerate(batches):
        preds += model.partial_fit(b, stats, np.random.default_rng(i)).assignments.tolist()
    scores = clustering_scores(labels, preds)
    assert scores["nmi"] >= 0.98  # measured 1.0 (0.997 with the true cosine 0.6)
    assert abs(len(set(preds)) - len(set(labels))) <= 2


@pytest.mark.parametrize("half_life", [0.0, 300.0])
def test_deltas_replay_to_the_writer_state(half_life: float) -> None:
    embs, _ = synthetic(600, 16, 0.6, seed=3)
    model, batches = model_and_batches(
        embs, cosine=0.6, half_life_docs=half_life, retire_min_mass=0.5
    )
    stats, replica = model.new_state(), model.new_state()
    retired = 0
    for i, b in enumerate(batches):
        res = model.partial_fit(b, stats, np.random.default_rng(i))
        retired += len(res.retired)
        replay_delta(replica, res.delta, half_life)
    assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, stats))
    np.testing.assert_allclose(model.resultants(replica), model.resultants(stats), atol=1e-12)
    if half_life:
        live = stats.active_slots()
        assert float(stats.mass(live).sum()) < 600 * 0.9  # old documents faded
        assert retired > 0


def test_same_seed_same_state_and_sampled_seating_runs() -> None:
    embs, _ = synthetic(300, 8, 0.7, seed=5)
    digests = []
    for _ in range(2):
        model, batches = model_and_batches(embs, cosine=0.7, deterministic=False)
        stats = model.new_state()
        for i, b in enumerate(batches):
            model.partial_fit(b, stats, np.random.default_rng(i))
        digests.append(state_digest(NamespaceState({}, stats)))
    assert digests[0] == digests[1]


def test_births_are_reported_once_with_their_first_document() -> None:
    embs, _ = synthetic(200, 16, 0.8, seed=2)
    model, batches = model_and_batches(embs, cosine=0.8)
    stats = model.new_state()
    res = model.partial_fit(batches[0], stats, np.random.default_rng(0))
    born = {u: d for u, d, _ in res.born}
    assert len(born) == len(res.born) == len(set(res.assignments.tolist()))
    for u, d in born.items():
        assert res.assignments[d] == u
        assert u not in res.assignments[:d].tolist()
    assert np.array_equal(np.sort(res.delta.born_uids), np.sort(np.array(list(born))))


def test_a_stray_member_no_longer_fits_its_cluster() -> None:
    rng = np.random.default_rng(0)
    p = 16
    a = np.zeros(p)
    a[0] = 1.0
    b = np.zeros(p)
    b[1] = 1.0
    kappa_cos = 0.8
    story = sample_vmf(np.repeat(a[None], 8, 0), vkern.kappa_from_cosine(kappa_cos, p), rng)
    stray = b  # orthogonal to the story
    model, _ = model_and_batches([a], cosine=kappa_cos)
    stats = model.new_state()
    x = np.vstack([stray, story])
    batch = emb_batch(x, 2 * p)
    res = model.partial_fit(batch, stats, rng, known=np.full(9, 5))  # all in one cluster
    fits = model.refound_test(stats, batch)
    feats = model.member_features(batch)
    assert not fits(5, *feats[0])  # the stray would open its own cluster
    assert fits(5, *feats[1])  # a story member sits back where it was
    assert res.assignments.tolist() == [5] * 9


def test_term_weights_leave_out_the_dimensions() -> None:
    p = 4
    model = VMFMixture(VMFConfig(dimension=p, cosine=0.5))
    model.bind_dimension_words([0, 1, 2, 3], [4, 5, 6, 7])
    stats = model.new_state()
    x = np.array([[0.5, 0.5, 0.5, -0.5]])
    batch = DocBatch(np.array([0, 2]), np.array([8, 9]), np.array([2, 1]), np.array([3]), 10, 8,
                     emb=x)  # fmt: skip
    res = model.partial_fit(batch, stats, np.random.default_rng(0))
    ws, cs = model.term_weights(stats, int(res.assignments[0]))
    assert ws.tolist() == [8, 9]
    assert cs.tolist() == [2.0, 1.0]


def test_config_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="dimension"):
        VMFConfig(dimension=0)
    with pytest.raises(ValueError, match="cosine"):
        VMFConfig(dimension=8, cosine=1.0)
    model = VMFMixture(VMFConfig(dimension=4))
    with pytest.raises(RuntimeError, match="bind_dimension_words"):
        model.resultants(MultinomialStats())
    model.bind_dimension_words([0, 1, 2, 3], [4, 5, 6, 7])
    with pytest.raises(ValueError, match="embedding"):  # a batch without embeddings
        model.partial_fit(
            DocBatch.from_docs([[0]], 8), MultinomialStats(), np.random.default_rng(0)
        )
