"""The vmf model's base measure: the fitted vMF prior on a cluster's mean direction
(:class:`~noveld.models.direction_prior.DirectionPrior`) in the seating kernel, in the numpy
scores re-founding asks, and on vectors in a narrow cone, where the uniform prior seats every
document in the first cluster."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.long_vectors import P, long_documents
from helpers.vmf_oracle import oracle_scores, oracle_seat, run_kernel, unit_rows
from helpers.vmf_streams import emb_batch, model_and_batches, synthetic
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.eval.metrics import clustering_scores
from noveld.models.direction_prior import DirectionPrior
from noveld.models.kernels import vmf as vkern
from noveld.models.vmf import VMFConfig, VMFMixture
from noveld.synth import sample_vmf


def test_the_prior_counts_each_cluster_once() -> None:
    """Cluster means uniform on the sphere, one cluster holding most documents: a weak prior
    (the documents' fit reads the big cluster as a shared direction); the same clusters in a
    cone: a strong one around its axis; no cluster: the uniform prior."""
    rng = np.random.default_rng(0)
    p, rho = 64, 0.7
    means = unit_rows(rng, 12, p)
    axis = unit_rows(rng, 1, p)[0]
    cone = means * 0.6 + axis * 0.8
    cone /= np.linalg.norm(cone, axis=1, keepdims=True)
    kappa = vkern.kappa_from_cosine(rho, p)
    sizes = np.array([400] + [10] * 11)
    weak, strong = [], []
    for centres, out in ((means, weak), (cone, strong)):
        x = sample_vmf(np.repeat(centres, sizes, 0), kappa, rng)
        r = np.array([x[g].sum(0) for g in np.split(np.arange(x.shape[0]), np.cumsum(sizes)[:-1])])
        mass = sizes.astype(float)
        out.append(DirectionPrior.of_clusters(r, mass, None, 0.5))
        out.append(DirectionPrior.fitted(r, mass, None, 0.5))
    assert weak[0].strength < 0.2 < 1.0 < weak[1].strength
    assert strong[0].strength > 1.0
    assert strong[0].pseudo is not None and strong[0].pseudo @ axis / strong[0].strength > 0.95
    assert DirectionPrior.of_clusters(np.zeros((2, p)), np.zeros(2), None, 0.5).pseudo is None


@settings(max_examples=40, deadline=None)
@given(
    st.integers(0, 10_000),
    st.integers(2, 12),
    st.integers(0, 5),
    st.sampled_from([0, 2]),
    st.sampled_from([0.0, 0.5]),
    st.sampled_from([0.3, 3.0]),
)
def test_seating_under_the_prior_equals_the_dense_oracle(
    seed: int, p: int, k0: int, sweeps: int, d: float, a: float
) -> None:
    """The kernel with a·μ₀ in every live slot's running ‖r‖² and r·x and in each new slot, and
    the oracle that adds it to dense resultants and scores the new cluster as one of resultant
    a·μ₀: the same seats, log normalisers and margins within 1e-9 (a dead slot stays dead)."""
    rng = np.random.default_rng(seed)
    centres = unit_rows(rng, 3, p)
    kappa = vkern.kappa_from_cosine(0.7, p)
    r0, mass0 = np.zeros((k0 + 1, p)), np.zeros(k0 + 1)
    for k in range(k0):
        n = int(rng.integers(1, 6))
        r0[k] = sample_vmf(np.repeat(centres[k % 3][None], n, 0), kappa, rng).sum(0)
        mass0[k] = n * float(rng.uniform(0.5, 1.0))
    x = np.concatenate([sample_vmf(centres[rng.integers(0, 3, 6)], kappa, rng),
                        unit_rows(rng, 3, p)])  # fmt: skip
    prior = a * unit_rows(rng, 1, p)[0]
    log_a = math.log(0.5)
    assign, log_norm, margin, _, _ = run_kernel(x, mass0, r0, kappa, d, log_a, sweeps, prior=prior)
    ref, ref_norm, ref_margin = oracle_seat(x, mass0, r0, kappa, d, log_a, sweeps, prior=prior)
    assert assign.tolist() == ref
    np.testing.assert_allclose(log_norm, ref_norm, rtol=1e-9, atol=1e-9)
    finite = np.isfinite(ref_margin)
    np.testing.assert_allclose(margin[finite], np.array(ref_margin)[finite], rtol=1e-9, atol=1e-9)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.5]))
def test_the_model_scores_are_the_oracles(seed: int, d: float) -> None:
    """``VMFMixture.scores`` (re-founding's question) under a prior is the oracle's formula; the
    uniform one's new cluster is C_p(0)."""
    rng = np.random.default_rng(seed)
    p = 8
    model = VMFMixture(VMFConfig(dimension=p, cosine=0.7, alpha=0.5, alpha_scaling="none",
                                 discount=d))  # fmt: skip
    r = unit_rows(rng, 4, p) * rng.uniform(0.5, 3.0, (4, 1))
    mass = np.array([2.0, 0.0, 3.5, 1.0])
    x = unit_rows(rng, 1, p)[0]
    prior = DirectionPrior(1.7 * unit_rows(rng, 1, p)[0])
    got, got_new = model.scores(x, mass, r, 1, prior)
    ref, ref_new = oracle_scores(x, mass, r, p, model.kappa, d, math.log(0.5), prior.pseudo)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    assert got_new == pytest.approx(ref_new, rel=1e-12)
    _, uniform_new = model.scores(x, mass, r, 1, DirectionPrior(None))
    live = int((mass > 0).sum())
    assert uniform_new == pytest.approx(
        math.log(0.5 + d * live) + vkern.log_sphere_density_at_zero(p)
    )


def seat(
    x: np.ndarray, labels: list, prior: bool, cosine: float, batch: int = 40, **cfg: float | str
) -> float:
    """NMI of the vmf model's seating of unit vectors ``x`` in batches, at typical cosine
    ``cosine``, under the fitted prior or the uniform one (α = 0.3 unless ``cfg`` says)."""
    cfg = {"alpha": 0.3, "alpha_scaling": "none", **cfg}
    model, batches = model_and_batches(
        list(x), batch_size=batch, cosine=cosine, direction_prior=prior, **cfg
    )  # type: ignore[arg-type]
    stats, rng, out = model.new_state(), np.random.default_rng(0), []
    for b in batches:
        out += model.partial_fit(b, stats, rng).assignments.tolist()
    return float(clustering_scores(labels, out)["nmi"])


def test_the_prior_keeps_documents_that_share_a_direction_in_their_stories() -> None:
    """Vectors that share one large component (their stories' members at cosine ~0.83 from
    their mean, every pair at ~0.7), scored at that cosine: under the uniform prior one cluster
    takes them all; under the fitted prior (the default) they keep their stories."""
    batch, labels = long_documents(np.random.default_rng(3), stories=8, docs=320)
    assert batch.emb is not None
    uniform = seat(batch.emb, labels, False, 0.8)
    fitted = seat(batch.emb, labels, True, 0.8)
    assert fitted >= 0.8 and uniform <= 0.1, (fitted, uniform)


def test_a_narrow_cone_of_generated_stories() -> None:
    """The generator's stories at p = 384 with a shared component added to every embedding
    (pairs of different stories at cosine ~0.5), at the model's default α: the uniform prior
    seats most stories together, the fitted one recovers them."""
    embs, labels = synthetic(1000, 384, 0.6, seed=4)
    x = np.array(embs) + unit_rows(np.random.default_rng(4), 1, 384)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    cfg: dict[str, float | str] = {"alpha": 0.03, "alpha_scaling": "batch"}
    uniform = seat(x, labels, False, 0.82, batch=64, **cfg)  # measured 0.558
    fitted = seat(x, labels, True, 0.82, batch=64, **cfg)  # measured 0.999
    assert fitted >= 0.95 and uniform <= 0.7, (fitted, uniform)


def test_refounding_asks_under_the_fitted_prior() -> None:
    """Stories in a cone, each a known cluster, and one document of story 0 put in story 1's:
    re-founding (under the prior fitted to the live clusters) says the stray no longer fits
    there and a member of story 1 does."""
    batch, labels = long_documents(np.random.default_rng(5), stories=4, docs=80)
    assert batch.emb is not None
    lab = np.array(labels)
    order = np.argsort(lab, kind="stable")
    x, lab = batch.emb[order], lab[order]
    model = VMFMixture(VMFConfig(dimension=P, cosine=0.8))
    model.bind_dimension_words(list(range(P)), list(range(P, 2 * P)))
    stats = model.new_state()
    known = lab.copy()
    known[0] = 1  # a story-0 document put in story 1's cluster
    b = emb_batch(x, 2 * P)
    model.partial_fit(b, stats, np.random.default_rng(0), known=known)
    prior = model.direction_prior(model.resultants(stats), model._live_mass(stats))
    assert prior.strength > 0.5  # the cone: a strong prior around its axis
    fits = model.refound_test(stats, b)
    feats = model.member_features(b)
    assert not fits(1, *feats[0])
    assert fits(1, *feats[int(np.flatnonzero(lab == 1)[0])])
