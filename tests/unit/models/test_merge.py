"""Merge moves (scale-out: two births of one story): the merge gain kernel against a
dense log-joint oracle, count conservation, and replay of a batch that merged."""

from __future__ import annotations

import math

import numpy as np
from helpers.dpmm_oracle import fitted_state, log_joint
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig, replay_delta
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import NamespaceState, state_digest


def dense(stats: MultinomialStats, vocab: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    slots = stats.active_slots()
    n = np.zeros((slots.shape[0], vocab))
    for i, k in enumerate(slots.tolist()):
        w, c = stats.word_counts(k)
        n[i, w] = c
    return slots, stats.mass(slots), n


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.5]), st.sampled_from([0.0, 30.0]))
def test_merge_gains_equal_the_log_joint_difference(seed: int, d: float, half_life: float) -> None:
    vocab, beta, theta = 30, 0.1, 0.5
    _, stats, _, _ = fitted_state(seed, vocab=vocab, discount=d, half_life=half_life)
    slots, m, n = dense(stats, vocab)
    if slots.shape[0] < 2:
        return
    young = slots[:3].astype(np.int64)
    gains = np.empty((young.shape[0], stats.kmax))
    kern.merge_gains(
        young,
        np.arange(vocab, dtype=np.int64),
        stats.m,
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
        math.log(theta + d * (slots.shape[0] - 1)),
        d,
        gains,
    )
    base = log_joint(m, n, beta, theta, d)
    row = {int(k): i for i, k in enumerate(slots.tolist())}
    checked = 0
    for i, y in enumerate(young.tolist()):
        for k in slots.tolist():
            if k == y:
                assert gains[i, k] == -np.inf
                continue
            a, b = row[y], row[k]
            shared = bool(np.any((n[a] > 0) & (n[b] > 0)))
            if not shared:
                assert gains[i, k] == -np.inf  # not a candidate (see the kernel docstring)
                continue
            keep = [j for j in range(len(slots)) if j not in (a, b)]
            m2 = np.append(m[keep], m[a] + m[b])
            n2 = np.vstack([n[keep], n[a] + n[b]])
            expected = log_joint(m2, n2, beta, theta, d) - base
            assert gains[i, k] == __import__("pytest").approx(expected, rel=1e-9, abs=1e-8)
            checked += 1
    assert checked > 0


def two_births_of_one_story() -> tuple[DPMM, MultinomialStats, DocBatch, np.ndarray]:
    """Three live clusters: an old one about words 10–13 and two born this batch about 1–4."""
    model = DPMM(DPMMConfig(alpha=0.1, beta=0.1, alpha_scaling="none", discount=0.0))
    docs = [[10, 11, 12, 13]] * 5 + [[1, 2, 3, 4], [1, 2, 3], [2, 3, 4, 1], [1, 3, 4]]
    vocab = 20
    stats = MultinomialStats.from_clusters(
        [0, 1, 2],
        [5.0, 2.0, 2.0],
        [20.0, 7.0, 7.0],
        [
            (np.array([10, 11, 12, 13]), np.array([5.0, 5.0, 5.0, 5.0])),
            (np.array([1, 2, 3, 4]), np.array([2.0, 2.0, 2.0, 1.0])),
            (np.array([1, 2, 3, 4]), np.array([2.0, 1.0, 2.0, 2.0])),
        ],
        1.0,
        3,
        9,
        vocab,
    )
    stats.fresh[1] = stats.fresh[2] = True
    assign = np.array([0] * 5 + [1, 1, 2, 2], dtype=np.int64)
    return model, stats, DocBatch.from_docs(docs, vocab), assign


def test_two_births_of_one_story_merge_and_counts_are_conserved() -> None:
    model, stats, batch, assign = two_births_of_one_story()
    before_tokens = float(stats.ntok[:3].sum())
    moves = model._merge(batch, assign, stats)
    assert len(moves) == 1
    src, dst = moves[0][0], moves[0][1]
    assert {src, dst} == {1, 2}
    assert not stats.alive[src] and stats.alive[dst] and stats.alive[0]
    assert stats.m[dst] == 4.0 and float(stats.ntok[:3].sum()) == before_tokens
    ws, cs = stats.word_counts(dst)
    assert dict(zip(ws.tolist(), cs.tolist(), strict=True)) == {1: 4.0, 2: 3.0, 3: 4.0, 4: 3.0}
    assert set(assign.tolist()) == {0, dst}


def test_a_batch_with_merges_replays_exactly() -> None:
    """A stream seated with a tiny α opens many clusters; merges fire and replay matches."""
    rng = np.random.default_rng(3)
    model = DPMM(
        DPMMConfig(alpha=0.02, beta=0.05, alpha_scaling="none", discount=0.5, rejuvenation_sweeps=0)
    )
    stats, replica = model.new_state(), model.new_state()
    merged = 0
    topics = [rng.choice(60, 8, replace=False) for _ in range(5)]
    for _ in range(15):
        docs = [rng.choice(topics[rng.integers(5)], 3).tolist() for _ in range(20)]
        res = model.partial_fit(DocBatch.from_docs(docs, 60), stats, rng)
        merged += len(res.merged)
        replay_delta(replica, res.delta, 0.0)
        assert set(res.assignments.tolist()) <= {int(u) for u in stats.uid[stats.active_slots()]}
    assert merged > 0
    assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, stats))
