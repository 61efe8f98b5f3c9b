"""The ``hdp`` model's vector view: the collapsed vMF term per category against a numpy
oracle, its group predictive, exact replay of deltas carrying vectors, and vectors separating
categories the words cannot."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from noveld.eval.metrics import clustering_scores
from noveld.models.base import DocBatch
from noveld.models.dpmm import replay_delta
from noveld.models.hdp import HDP, HDPConfig
from noveld.models.hdp.vectors import category_vectors
from noveld.models.kernels import hdp_sampler as smp
from noveld.models.kernels import vmf as vkern
from noveld.models.kernels import vmf_table as vtable
from noveld.models.kernels.hdp_moves import _context_score
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import NamespaceState, state_digest

TOPICS = 5
WORDS = 30
P = 8


def unit(rng: np.random.Generator, n: int, centre: np.ndarray | None = None) -> np.ndarray:
    x = rng.normal(size=(n, P)) + (0.0 if centre is None else centre)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def make_model(**kw: object) -> HDP:
    cfg = dict(topics=TOPICS, sweeps=2, table_alpha=0.5, gamma=2.0, dimension=P)
    cfg.update(kw)
    model = HDP(HDPConfig(**cfg))  # type: ignore[arg-type]
    model.bind_topic_words(list(range(TOPICS)))
    base = TOPICS + WORDS
    model.bind_dimension_words(
        list(range(base, base + P)), list(range(base + P, base + 2 * P)), base + 2 * P
    )
    return model


def vocab_size() -> int:
    return TOPICS + WORDS + 2 * P + 1


def word_batches(seed: int, n_batches: int, size: int) -> list[DocBatch]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        docs = [
            (TOPICS + rng.integers(0, WORDS, size=rng.integers(1, 9))).tolist() for _ in range(size)
        ]
        b = DocBatch.from_docs(docs, vocab_size())
        emb = unit(rng, size)
        emb[rng.random(size) < 0.2] = 0.0  # some documents have no vector
        out.append(replace(b, emb=emb))
    return out


def oracle(x: np.ndarray, r: np.ndarray, kappa: float, w: float) -> float:
    """w · [log C_p(κ) + log C_p(κ‖R‖) − log C_p(κ‖R + x‖)], from the resultant itself."""
    c = vkern.log_vmf_normalizer
    p = x.shape[0]
    return w * (c(p, kappa) + c(p, kappa * np.linalg.norm(r)) - c(p, kappa * np.linalg.norm(r + x)))


def bundle(rng: np.random.Generator, n_docs: int, cap: int, pseudo: np.ndarray) -> tuple:
    """A context bundle without fields, with the vector part built from ``pseudo`` (a·μ₀)."""
    vec = category_vectors(P, 0.4, None, True, list(range(P)), list(range(P, 2 * P)), 2 * P)
    emb = unit(rng, n_docs)
    emb[0] = 0.0  # document 0 has no vector
    res = np.tile(pseudo, (cap + 1, 1))
    table = vtable.normalizer_table(P, vec.kappa)
    rn2 = np.einsum("kj,kj->k", res, res)
    logc = np.array([vkern.log_vmf_normalizer(P, vec.kappa * np.sqrt(q)) for q in rn2])
    par = np.array([vec.kappa, vec.weight, vkern.log_vmf_normalizer(P, vec.kappa)])
    has = (np.abs(emb).sum(1) > 0).astype(np.int8)
    ctx = (
        np.zeros(n_docs + 1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
        np.zeros(0), np.zeros((cap, 0)), np.zeros(n_docs, np.int64),
    )  # fmt: skip
    return (*ctx, emb, emb @ res.T, rn2, logc, par, table, has, emb @ emb.T), vec


@pytest.mark.parametrize("strength", [0.0, 1.7])
def test_the_vector_term_matches_the_numpy_oracle(strength: float) -> None:
    """Each category's and the new one's term is the collapsed vMF predictive of the vector
    given the category's resultant plus the prior's a·μ₀, as documents move in and out."""
    rng = np.random.default_rng(3)
    mu0 = unit(rng, 1)[0]
    cx, vec = bundle(rng, 12, 4, strength * mu0)
    emb = cx[6]
    members: dict[int, list[int]] = {0: [], 1: [], 2: []}
    for d in range(1, 10):
        k = d % 3
        smp.move_context(d, k, 1.0, cx)
        members[k].append(d)
    smp.move_context(4, 1, -1.0, cx)  # out again
    members[1].remove(4)
    extra, none = np.empty(5), np.zeros(5)
    for d in (4, 10, 11):
        got = smp.context_weights(d, 3, 0.1, cx, extra, none)
        for k in range(3):
            r = strength * mu0 + emb[members[k]].sum(0)
            assert got[k] == pytest.approx(oracle(emb[d], r, vec.kappa, vec.weight), abs=1e-9)
        assert got[3] == pytest.approx(oracle(emb[d], strength * mu0, vec.kappa, vec.weight))
    assert not smp.has_context(0, cx)  # no vector, no fields: nothing to score
    assert smp.context_weights(0, 3, 0.1, cx, extra, none) is none


def test_a_groups_vector_score_is_its_collapsed_marginal() -> None:
    """The merge and split moves' group score of the vectors under a new category is the
    closed-form marginal C_p(κ)^n C_p(κ‖aμ₀‖) / C_p(κ‖aμ₀ + Σx‖), tempered by w."""
    rng = np.random.default_rng(4)
    mu0 = unit(rng, 1)[0]
    a = 2.5
    cx, vec = bundle(rng, 6, 3, a * mu0)
    docs = np.array([1, 2, 3, 5], dtype=np.int64)
    before = cx[7].copy(), cx[8].copy()
    got = _context_score(docs, 2, 0.1, cx)
    c = vkern.log_vmf_normalizer
    s = a * mu0 + cx[6][docs].sum(0)
    want = vec.weight * (
        4 * c(P, vec.kappa) + c(P, vec.kappa * a) - c(P, vec.kappa * np.linalg.norm(s))
    )
    assert got == pytest.approx(want, rel=1e-9)
    assert np.allclose(cx[7], before[0]) and np.allclose(cx[8], before[1])  # as they were


@pytest.mark.parametrize("half_life", [0.0, 30.0])
def test_replaying_deltas_with_vectors_rebuilds_the_writer_state(half_life: float) -> None:
    model = make_model(half_life_docs=half_life, deterministic=False)
    live = NamespaceState({}, model.new_state())
    replayed = NamespaceState({}, MultinomialStats())
    for i, b in enumerate(word_batches(5, 5, 20)):
        res = model.partial_fit(b, live.stats, np.random.default_rng(i))
        replay_delta(replayed.stats, res.delta, half_life)
        assert state_digest(replayed) == state_digest(live)
    assert model.vectors is not None
    _, n = model.vectors.resultants(live.stats, live.stats.scale)
    if half_life == 0.0:  # every vector counted once, at the category carrying its document
        total = sum(float((np.abs(b.emb).sum(1) > 0).sum()) for b in word_batches(5, 5, 20))
        assert n.sum() == pytest.approx(total)


def test_vectors_separate_categories_the_words_cannot() -> None:
    """Two stories with the same words but distinct vectors: words alone make one category,
    the vMF term two."""
    rng = np.random.default_rng(9)
    centres = 4.0 * unit(rng, 2)
    labels = np.tile([0, 1], 60)
    docs = [(TOPICS + rng.integers(0, 6, size=6)).tolist() for _ in labels]
    emb = np.concatenate([unit(rng, 1, centres[c]) for c in labels])
    batch = replace(DocBatch.from_docs(docs, vocab_size()), emb=emb)
    scores = {}
    for weight in (0.0, 1.0):
        model = make_model(view_weight=weight, deterministic=True, zeta=0.2, cosine=0.8)
        stats = model.new_state()
        out = []
        for i in range(0, len(labels), 40):
            part = DocBatch.from_docs(docs[i : i + 40], vocab_size())
            part = replace(part, emb=batch.emb[i : i + 40])
            out.append(model.partial_fit(part, stats, np.random.default_rng(i)).assignments)
        scores[weight] = clustering_scores(labels, np.concatenate(out))["nmi"]
    assert scores[0.0] < 0.2
    assert scores[1.0] > 0.8


def test_the_vectors_must_match_the_dimension() -> None:
    model = make_model()
    b = word_batches(1, 1, 5)[0]
    with pytest.raises(ValueError, match="vectors must be"):
        model.partial_fit(replace(b, emb=np.zeros((5, P + 1))), model.new_state(),
                          np.random.default_rng(0))  # fmt: skip
    with pytest.raises(ValueError, match="dimension ids"):
        make_model().bind_dimension_words([1], [2], 3)


def test_known_labels_with_vectors_replay_and_absorb_their_twins() -> None:
    """A known category and an unlabelled twin of one story (same words, same vectors): the
    twin is absorbed with the vectors' gain added to the words', and the replay still rebuilds
    the writer's state."""
    rng = np.random.default_rng(11)
    centre = 4.0 * unit(rng, 1)
    words = [(TOPICS + rng.integers(0, 5, size=6)).tolist() for _ in range(20)]
    emb = unit(rng, 20, centre[0])
    model = make_model(deterministic=True, zeta=0.2, absorb_margin=0.0)
    live, replica = model.new_state(), MultinomialStats()
    first = model.partial_fit(
        replace(DocBatch.from_docs(words[:10], vocab_size()), emb=emb[:10]),
        live, np.random.default_rng(0),
    )  # fmt: skip
    replay_delta(replica, first.delta, 0.0)
    twin = int(first.assignments[0])
    known = np.full(10, -1, dtype=np.int64)
    known[:5] = 777
    second = model.partial_fit(
        replace(DocBatch.from_docs(words[10:], vocab_size()), emb=emb[10:]),
        live, np.random.default_rng(1), known, {777},
    )  # fmt: skip
    replay_delta(replica, second.delta, 0.0)
    assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, live))
    assert (twin, 777) in {(s, d) for s, d, _ in second.merged}
    assert set(second.assignments.tolist()) == {777}
    assert model.vectors is not None
    _, n = model.vectors.resultants(live, live.scale)
    assert n.sum() == pytest.approx(20.0)  # every vector, the twin's moved with its counts
