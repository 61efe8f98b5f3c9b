"""The learned vMF concentration: the pair statistics against a brute-force count of member
pairs, the estimator recovers the typical cosine of vMF clusters and ignores a direction every
document shares, and a model with ``cosine=None`` learns it from its statistics alone (a replica
replaying the deltas learns the writer's)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.hybrid_oracle import hybrid, make_batch
from helpers.vmf_streams import model_and_batches, synthetic
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.eval.metrics import clustering_scores
from noveld.models.concentration import (
    COSINE_STEP,
    HIGH,
    LOW,
    learned_cosine,
    pair_statistics,
)
from noveld.models.dpmm import replay_delta
from noveld.models.hybrid import HybridConfig
from noveld.models.kernels.vmf import kappa_from_cosine
from noveld.models.vmf import VMFConfig, VMFMixture
from noveld.synth import sample_vmf


def unit_rows(rng: np.random.Generator, n: int, p: int) -> np.ndarray:
    x = rng.standard_normal((n, p))
    out: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def grouped(x: np.ndarray, groups: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Resultants and masses of a partition (rows of empty groups: zero, mass 0)."""
    res = np.zeros((k, x.shape[1]))
    np.add.at(res, groups, x)
    return res, np.bincount(groups, minlength=k).astype(np.float64)


@settings(deadline=None, max_examples=60)
@given(st.integers(0, 10_000), st.integers(1, 40), st.integers(2, 9), st.integers(1, 6))
def test_pair_statistics_count_every_pair_of_members(seed: int, n: int, p: int, k: int) -> None:
    rng = np.random.default_rng(seed)
    x = unit_rows(rng, n, p)
    groups = rng.integers(0, k, n)
    res, mass = grouped(x, groups, k + 1)  # the last slot stays empty
    gram = x @ x.T
    off = ~np.eye(n, dtype=np.bool_)
    same = groups[:, None] == groups[None, :]
    want = (
        float(gram[same & off].sum()),
        float((same & off).sum()),
        float(gram[off].sum()),
        float(off.sum()),
    )
    np.testing.assert_allclose(pair_statistics(res, mass), want, rtol=1e-9, atol=1e-9)


@settings(deadline=None, max_examples=60)
@given(st.integers(0, 10_000), st.integers(0, 60), st.floats(0.05, 0.95), st.booleans())
def test_the_learned_cosine_is_on_its_grid_and_in_range(
    seed: int, n: int, prior: float, background: bool
) -> None:
    rng = np.random.default_rng(seed)
    x = unit_rows(rng, n, 5)
    res, mass = grouped(x, rng.integers(0, 4, n), 4)
    c = learned_cosine(res, mass, prior, background)
    assert LOW - 1e-12 <= c <= HIGH + 1e-12
    assert abs(c / COSINE_STEP - round(c / COSINE_STEP)) < 1e-6


def test_no_pairs_give_the_prior() -> None:
    empty = np.zeros((3, 8))
    assert learned_cosine(empty, np.zeros(3), 0.4) == pytest.approx(0.4)
    singletons = unit_rows(np.random.default_rng(0), 3, 8)  # singletons carry no pair
    assert learned_cosine(singletons, np.ones(3), 0.4, background=False) == pytest.approx(0.4)


def vmf_clusters(
    rng: np.random.Generator, p: int, cosine: float, sizes: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Members of vMF clusters of typical cosine ``cosine`` (κ by paper 003 eq. 10)."""
    kappa = kappa_from_cosine(cosine, p)
    mus = unit_rows(rng, len(sizes), p)
    x = np.concatenate([sample_vmf(np.repeat(mus[k : k + 1], n, 0), kappa, rng)
                        for k, n in enumerate(sizes)])  # fmt: skip
    return x, np.repeat(np.arange(len(sizes)), sizes)


@pytest.mark.parametrize(("p", "cosine"), [(64, 0.4), (256, 0.6), (384, 0.5)])
def test_recovers_the_cosine_of_vmf_clusters(p: int, cosine: float) -> None:
    rng = np.random.default_rng(p)
    x, groups = vmf_clusters(rng, p, cosine, [2, 3, 40, 80, 150])
    res, mass = grouped(x, groups, 5)
    assert learned_cosine(res, mass, 0.5, background=False) == pytest.approx(cosine, abs=0.02)
    # the plug-in r̄ = ‖r‖/n of small clusters is biased up (singletons: 1); pairs are not
    x, groups = vmf_clusters(rng, p, cosine, [1] * 50 + [2] * 50 + [60])
    res, mass = grouped(x, groups, 101)
    assert learned_cosine(res, mass, 0.5, background=False) == pytest.approx(cosine, abs=0.02)


def test_a_direction_every_document_shares_is_taken_out() -> None:
    rng = np.random.default_rng(1)
    p = 128
    x, groups = vmf_clusters(rng, p, 0.5, [60] * 8)
    res, mass = grouped(x, groups, 8)
    plain = learned_cosine(res, mass, 0.5)
    shift = x + 0.8 * unit_rows(rng, 1, p)  # random pairs now have cosine ≈ 0.4
    shift /= np.linalg.norm(shift, axis=1, keepdims=True)
    res, mass = grouped(shift, groups, 8)
    _, _, everywhere, all_pairs = pair_statistics(res, mass)
    assert everywhere / all_pairs > 0.3
    assert learned_cosine(res, mass, 0.5, background=False) > plain + 0.1
    assert learned_cosine(res, mass, 0.5) == pytest.approx(plain, abs=0.03)


def test_a_model_learns_the_stream_cosine_from_its_statistics() -> None:
    """Under the uniform prior on the mean direction, the generator's own base measure (its
    stories' directions are uniform on the sphere): the estimator is checked on the partition
    the uniform prior gives (under the fitted prior with κ learned too: NMI 0.92)."""
    embs, labels = synthetic(1200, 64, 0.6, seed=2)
    model, batches = model_and_batches(embs, cosine=None, deterministic=True, direction_prior=False)
    assert model.cosine == 0.5 and model.kappa == pytest.approx(kappa_from_cosine(0.5, 64))
    stats = model.new_state()
    preds: list[int] = []
    for i, b in enumerate(batches):
        preds += model.partial_fit(b, stats, np.random.default_rng(i)).assignments.tolist()
    assert clustering_scores(labels, preds)["nmi"] >= 0.98
    assert model.cosine == pytest.approx(0.6, abs=0.03)
    # a pure function of the statistics: another model (a replica, a restart) reads the same
    other, _ = model_and_batches(embs, cosine=None)
    assert other.learn_concentration(stats) == model.learn_concentration(stats)
    assert other.kappa == pytest.approx(kappa_from_cosine(other.cosine, 64))


def test_a_configured_cosine_is_kept() -> None:
    model = VMFMixture(VMFConfig(dimension=16, cosine=0.7))
    stats = model.new_state()
    assert model.learn_concentration(stats) == 0.7
    assert model.kappa == pytest.approx(kappa_from_cosine(0.7, 16))
    assert HybridConfig(dimension=16, cosine=None).kappa == pytest.approx(
        kappa_from_cosine(0.4, 16)  # the hybrid's prior
    )
    assert math.isfinite(VMFConfig(dimension=16, cosine=None).kappa)


def test_a_replica_learns_the_writers_kappa_from_the_replayed_deltas() -> None:
    rng = np.random.default_rng(3)
    writer = hybrid(1.0, cosine=None, merge=True, merge_scope="all", half_life_docs=40.0)
    reader = hybrid(1.0, cosine=None)
    stats, replica = writer.new_state(), writer.new_state()
    used = []
    for i in range(8):
        res = writer.partial_fit(make_batch(rng, 20, 0.9, 0.9), stats, np.random.default_rng(i))
        used.append(writer.cosine)  # learned from the statistics before this batch
        replay_delta(replica, res.delta, 40.0, uncounted=writer.uncounted_words)
        assert reader.learn_concentration(replica) == writer.learn_concentration(stats)
    assert used[0] == 0.4 and len(set(used)) > 1  # the prior first, then learned
    assert reader.kappa == writer.kappa
