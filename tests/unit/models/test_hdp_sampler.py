"""The hdp batch sampler's sparse predictives against dense numpy oracles (paper 000 eqs. 4–7):
the blocked table predictive, its upper bound, the MAP category and topic choices, and the
bookkeeping of a token move."""

from __future__ import annotations

import math

import numpy as np
from helpers.hdp_state import BETA, GAMMA, N_CATS, N_TOPICS, N_WORDS, ROOM, VBETA, ZETA, State
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.models.kernels import hdp_sampler as smp
from noveld.models.kernels import hdp_scores as sc


def dense_block(s: State, ws: list[int], k: int) -> float:
    """Oracle of block_log_predictive: the better of the MAP-topic reading (every topic scored,
    the unused topics one class) and, when a topic is unused, all words in the first one."""
    phi = s.phi()
    okl_k = s.okl[k] if k >= 0 else np.zeros(N_TOPICS)
    ok_k = s.ok[k] if k >= 0 else 0.0
    own = np.zeros(N_TOPICS)
    empty = s.nl < sc.EMPTY_BELOW
    out = 0.0
    fresh = 0.0
    e = int(np.flatnonzero(empty)[0]) if empty.any() else -1
    for i, w in enumerate(ws):
        if e >= 0:  # topic e's word distribution holds the earlier words of ws
            weights = (ZETA + okl_k) * phi[:, w]
            earlier = ws[:i].count(w)
            weights[e] = (ZETA + okl_k[e] + i) * (BETA + s.nlw[w, e] + earlier)
            weights[e] /= VBETA + s.nl[e] + i
            fresh += math.log(weights.sum() / (N_TOPICS * ZETA + ok_k + i))
        weights = (ZETA + okl_k + own) * phi[:, w]
        out += math.log(weights.sum() / (N_TOPICS * ZETA + ok_k + i))
        unclaimed = np.flatnonzero(empty & (own == 0))
        cand = np.where(empty & (own == 0), -1.0, weights)
        best = int(np.argmax(cand))
        if unclaimed.shape[0] and weights[unclaimed].sum() > cand[best]:
            best = int(unclaimed[0])
        own[best] += 1
    return max(out, fresh) if e >= 0 else out


def word_summaries(s: State, ws: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    n = len(ws)
    sums = np.array([sc.phi_sum(w, s.tw, s.ix, BETA) for w in ws])
    best = np.array([sc.best_used_topic(w, s.tw, s.ix, BETA, int(s.ctl[3])) for w in ws])
    empties = np.flatnonzero(s.nl < sc.EMPTY_BELOW)[:n]
    return sums, best, np.asarray(empties, dtype=np.int64), int(s.ctl[3])


def earlier(ws: list[int]) -> np.ndarray:
    """Each word's earlier occurrences in ws (the oracle of earlier_occurrences)."""
    return np.array([ws[:i].count(w) for i, w in enumerate(ws)], dtype=float)


docs = st.lists(st.integers(0, N_WORDS - 1), min_size=1, max_size=7)


@given(st.integers(0, 100_000), docs)
@settings(deadline=None, max_examples=150)
def test_block_predictive_matches_the_dense_oracle(seed: int, ws: list[int]) -> None:
    s = State(seed)
    sums, best, empties, n_empty = word_summaries(s, ws)
    np.testing.assert_allclose(sums, s.phi()[:, ws].sum(axis=0), rtol=1e-12)
    arr = np.array(ws, dtype=np.int64)
    for k in [-1, *range(N_CATS)]:
        got = sc.block_log_predictive(
            arr, k, ZETA, BETA, s.tw, s.cat, s.ix, sums, best, empties, n_empty,
            np.empty(len(ws), np.int64), np.empty(len(ws)), VBETA, earlier(ws),
        )  # fmt: skip
        assert math.isclose(got, dense_block(s, ws, k), rel_tol=1e-10, abs_tol=1e-10)


@given(st.lists(st.integers(0, 5), max_size=30))
@settings(deadline=None)
def test_earlier_occurrences_counts_each_words_earlier_copies(ws: list[int]) -> None:
    got = np.full(len(ws), -1.0)
    sc.earlier_occurrences(np.array(ws, dtype=np.int64), got)
    np.testing.assert_array_equal(got, earlier(ws))


@given(st.integers(0, 100_000), docs, st.sampled_from([0.0, 0.5]), st.sampled_from([0, 2, 15]))
@settings(deadline=None, max_examples=150)
def test_upper_bound_holds_and_map_choice_is_the_exact_argmax(
    seed: int, ws: list[int], d: float, conc: int
) -> None:
    """Under the DP (d = 0) and a Pitman–Yor category level (weights m_k − d, γ + d·K), with
    and without the length tempering τ = (1 + s)/(n + s) of the words (s = 0: τ = 1)."""
    s = State(seed)
    arr = np.array(ws, dtype=np.int64)
    n = len(ws)
    tau = min(1.0, (1 + conc) / (n + conc)) if conc > 0 else 1.0
    sums, _, empties, n_empty = word_summaries(s, ws)
    exact = np.full(N_CATS + 1, -np.inf)
    for k in range(N_CATS):
        if s.mk[k] > 0:
            exact[k] = math.log(s.mk[k] - d) + tau * dense_block(s, ws, k)
    n_live = int((s.mk[:N_CATS] > 0).sum())
    exact[N_CATS] = math.log(GAMMA + d * n_live) + tau * dense_block(s, ws, -1)
    phi = s.phi()
    top = np.array([max(BETA / VBETA, phi[:, w].max()) for w in ws]) * (1 + 1e-9)
    outside = max(
        max(ZETA * t for t in top),
        max(n_empty * ZETA * phi[e, w] for w in ws for e in empties[: min(n, n_empty)]),
    )
    fresh_e = int(empties[0]) if n_empty > 0 else -1
    phi_e = phi[fresh_e, ws] if fresh_e >= 0 else np.full(n, -1.0)
    for out_arg in (outside * (1 + 1e-9), np.inf):  # the tight bound, and the loose one
        bound = np.empty(N_CATS + ROOM)
        sc.upper_bound_log_predictive(
            arr, ZETA, BETA, s.tw, s.cat, s.ix, N_CATS, sums, top, out_arg,
            np.empty((N_CATS + ROOM, 2 * n)), bound, -np.inf, None, d, tau, earlier(ws),
            phi_e, VBETA, fresh_e,
        )  # fmt: skip
        for k in range(N_CATS):
            assert bound[k] >= exact[k] - 1e-9, (k, bound[k], exact[k])
    logw = np.empty(N_CATS + ROOM + 1)
    total = np.empty(1)
    got = sc.choose_block_category(
        arr, ZETA, BETA, VBETA, GAMMA, s.tw, s.cat, s.ix, s.ctl, N_CATS,
        sc.block_scratch(n, N_CATS + ROOM), logw, 0.5, True, total, np.zeros(N_CATS + ROOM + 1),
        False, d, tau,
    )  # fmt: skip
    assert got == int(np.argmax(exact))  # pruning by the bound never changes the argmax
    # the marginal: evaluated categories exactly, others by their bound or not at all (those
    # below the new category's score), so within a factor K + 1 either way
    lse = float(np.logaddexp.reduce(exact))
    slack = math.log(N_CATS + 1) + 1e-9
    assert lse - slack <= total[0] <= lse + slack
    sampled = np.empty(1)
    sc.choose_block_category(
        arr, ZETA, BETA, VBETA, GAMMA, s.tw, s.cat, s.ix, s.ctl, N_CATS,
        sc.block_scratch(n, N_CATS + ROOM), logw, 0.5, False, sampled, np.zeros(N_CATS + ROOM + 1),
        False, d, tau,
    )  # fmt: skip
    assert math.isclose(sampled[0], lse, rel_tol=1e-10)  # sampling scores every category


@given(st.integers(0, 100_000), st.integers(0, N_WORDS - 1), st.integers(0, N_CATS - 1))
@settings(deadline=None, max_examples=200)
def test_map_topic_is_the_dense_argmax_with_unused_topics_as_one_class(
    seed: int, w: int, k: int
) -> None:
    s = State(seed)
    weights = (ZETA + s.okl[k]) * s.phi()[:, w]
    empty = s.nl < sc.EMPTY_BELOW
    used = np.where(empty, -1.0, weights)
    expected = int(np.argmax(used))
    if weights[empty].sum() > used[expected]:
        expected = int(np.flatnonzero(empty)[0])
    got = sc.draw_topic(w, k, ZETA, BETA, s.tw, s.cat, s.ix, s.ctl, np.empty(N_TOPICS), 0.5, True)
    assert got == expected


@given(st.integers(0, 100_000), st.integers(0, N_WORDS - 1), st.integers(0, N_CATS - 1))
@settings(deadline=None, max_examples=50)
def test_sampled_topic_follows_eq7(seed: int, w: int, k: int) -> None:
    s = State(seed)
    p = (ZETA + s.okl[k]) * s.phi()[:, w]
    p = p / p.sum()
    wts = np.empty(N_TOPICS)
    us = (np.arange(4000) + 0.5) / 4000  # a uniform grid: frequencies are the probabilities
    got = [sc.draw_topic(w, k, ZETA, BETA, s.tw, s.cat, s.ix, s.ctl, wts, u, False) for u in us]
    freq = np.bincount(got, minlength=N_TOPICS) / len(us)
    np.testing.assert_allclose(freq, p, atol=1.0 / 4000 * 2)


@given(st.integers(0, 100_000), st.integers(0, 10_000))
@settings(deadline=None, max_examples=60)
def test_token_moves_keep_every_index_consistent(seed: int, moves_seed: int) -> None:
    s = State(seed)
    rng = np.random.default_rng(moves_seed)
    held: list[tuple[int, int, int]] = []
    for _ in range(40):
        w = int(rng.integers(N_WORDS))
        mine = [h for h in held if h[0] == w]
        if mine and (rng.random() < 0.4 or len(mine) == s.tokens[w]):  # a token leaves
            h = mine[int(rng.integers(len(mine)))]
            held.remove(h)
            smp.move_token(h[0], h[1], h[2], -1.0, VBETA, s.tw, s.cat, s.ix, s.ctl)
        elif len(mine) < s.tokens[w]:  # one of the batch's tokens of w takes a topic
            y, k = int(rng.integers(N_TOPICS)), int(rng.integers(N_CATS))
            smp.move_token(w, y, k, 1.0, VBETA, s.tw, s.cat, s.ix, s.ctl)
            held.append((w, y, k))
        nz, nzlen, innz, cz, czlen, wz, wz_ptr, wzlen = s.ix
        for kk in range(N_CATS):
            listed = set(nz[kk, : nzlen[kk]].tolist())
            assert set(np.flatnonzero(s.okl[kk] > 0).tolist()) <= listed
            assert listed == set(np.flatnonzero(innz[kk]).tolist())
        for ll in range(N_TOPICS):
            assert set(cz[ll, : czlen[ll]].tolist()) == set(np.flatnonzero(innz[:, ll]).tolist())
        for ww in range(N_WORDS):
            listed = set(wz[wz_ptr[ww] : wz_ptr[ww] + wzlen[ww]].tolist())
            assert set(np.flatnonzero(s.nlw[ww] > 0).tolist()) <= listed
            assert wz_ptr[ww] + wzlen[ww] <= wz_ptr[ww + 1]
        np.testing.assert_allclose(s.inv, 1.0 / (VBETA + s.nl), rtol=1e-12)
        assert math.isclose(s.tw[3][0], s.inv.sum(), rel_tol=1e-9)
        empty = np.flatnonzero(s.nl < sc.EMPTY_BELOW)
        assert s.ctl[3] == empty.shape[0]
        assert s.ctl[4] == (int(empty[0]) if empty.shape[0] else -1)
        np.testing.assert_allclose(s.ok, s.okl.sum(axis=1), atol=1e-9)
