"""The hybrid scores the vectors around the stream's mean vector: mean-pooled vectors of long
documents share a large component, and left in it seats them all in one cluster."""

from __future__ import annotations

import numpy as np
from helpers.long_vectors import long_documents, seat
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.eval.metrics import clustering_scores
from noveld.models.hybrid_batch import Centring

P = 32


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(3, 12))
def test_centred_vectors_are_unit_rows_less_the_mean(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((n, P))
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    emb[0] = 0.0  # no vector: stays none, and is not counted in the mean
    c = Centring.of(np.zeros((0, P)), np.zeros(0), emb)
    assert c.mean is not None
    np.testing.assert_allclose(c.mean, emb[1:].mean(axis=0))
    out = c.vectors(emb)
    assert not out[0].any()
    np.testing.assert_allclose(np.linalg.norm(out[1:], axis=1), 1.0)
    want = emb[1:] - c.mean
    np.testing.assert_allclose(out[1:], want / np.linalg.norm(want, axis=1, keepdims=True))


def test_the_mean_counts_live_clusters_by_their_mass_and_the_batch() -> None:
    r = np.array([[3.0, 0.0, 0.0], [0.0, 4.0, 0.0], [0.0, 0.0, 100.0]])
    mass = np.array([3.0, 5.0, 0.0])  # a dead slot's resultant does not count
    c = Centring.of(r, mass)
    assert c.mean is not None
    np.testing.assert_allclose(c.mean, [3.0 / 8.0, 4.0 / 8.0, 0.0])
    np.testing.assert_allclose(c.resultants(r, mass)[:2], r[:2] - np.outer(mass[:2], c.mean))
    c = Centring.of(r, mass, np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    assert c.mean is not None
    np.testing.assert_allclose(c.mean, np.array([3.0, 4.0, 1.0]) / 9.0)
    assert Centring.of(np.zeros((0, 3)), np.zeros(0)).mean is None
    none = Centring(None)
    assert none.vectors(r) is r and none.resultants(r, mass) is r


def test_centring_keeps_documents_that_share_a_direction_in_their_stories() -> None:
    batch, labels = long_documents(np.random.default_rng(3), stories=8, docs=320)
    centred = clustering_scores(labels, seat(batch, centre=True))["nmi"]
    raw = clustering_scores(labels, seat(batch, centre=False))["nmi"]
    assert centred >= 0.8 and raw <= 0.1, (centred, raw)  # raw: one cluster
