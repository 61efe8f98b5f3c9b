"""The group predictive of the hdp's burst split and merge of births against a plain transcription
of its definition (each word's earlier occurrences found by scanning the group), on the random
consistent states of ``helpers/hdp_state.py``."""

from __future__ import annotations

import math

import numpy as np
from helpers.hdp_state import BETA, N_CATS, N_TOPICS, N_WORDS, VBETA, ZETA, State
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.models.kernels import hdp_scores as sc


def scan_group(s: State, ws: list[int], k: int, empties: np.ndarray, n_empty: int) -> float:
    """Oracle of group_log_predictive: per word, the state's numerator over the category's
    topics and the word's best used topic, then the group's own topics (slots) with the word's
    earlier occurrences in each counted by a scan; greedy MAP slots, unused topics as one
    class; and the better of that and every word on the first unused topic."""
    nlw, nl, inv = s.nlw, s.nl, s.inv
    okl = s.okl[k] if k >= 0 else np.zeros(N_TOPICS)
    base = s.ok[k] if k >= 0 else 0.0

    def ph(w: int, y: int) -> float:
        return (BETA + nlw[w, y]) * inv[y]

    n = len(ws)
    slot_t: list[int] = []
    slot_c: list[float] = []
    pair: list[int] = []
    nums = []
    claimed = 0
    out = 0.0
    for i, w in enumerate(ws):
        num = ZETA * sum(ph(w, y) for y in range(N_TOPICS))
        best_v, best_l = -1.0, -1
        cands = [y for y in range(N_TOPICS) if k >= 0 and s.okl[k, y] > 0]
        for y in cands:
            num += okl[y] * ph(w, y)
            v = (ZETA + okl[y]) * ph(w, y)
            if nl[y] >= sc.EMPTY_BELOW and (v > best_v or (v == best_v and y < best_l)):
                best_v, best_l = v, y
        bu = sc.best_used_topic(w, s.tw, s.ix, BETA, n_empty)
        if bu >= 0:
            v = (ZETA + okl[bu]) * ph(w, bu)
            if v > best_v or (v == best_v and bu < best_l):
                best_v, best_l = v, bu
        nums.append(num)
        for j, y in enumerate(slot_t):
            same = sum(1.0 for q in range(i) if ws[q] == w and pair[q] == j)
            v = (
                (ZETA + okl[y] + slot_c[j])
                * (BETA + nlw[w, y] + same)
                / (VBETA + nl[y] + slot_c[j])
            )
            num += v - (ZETA + okl[y]) * ph(w, y)
            if v > best_v or (v == best_v and y < best_l):
                best_v, best_l = v, y
        out += math.log(num / (N_TOPICS * ZETA + base + i))
        if claimed < n_empty:
            e = int(empties[claimed])
            if (n_empty - claimed) * ZETA * ph(w, e) > best_v:
                best_l = e
                claimed += 1
        if best_l not in slot_t:
            slot_t.append(best_l)
            slot_c.append(0.0)
        j = slot_t.index(best_l)
        slot_c[j] += 1.0
        pair.append(j)
    if n_empty > 0:
        e = int(empties[0])
        fresh = 0.0
        for i, w in enumerate(ws):
            same = sum(1.0 for q in range(i) if ws[q] == w)
            num = nums[i] + (ZETA + okl[e] + i) * (BETA + nlw[w, e] + same) / (VBETA + nl[e] + i)
            num -= (ZETA + okl[e]) * ph(w, e)
            fresh += math.log(num / (N_TOPICS * ZETA + base + i))
        out = max(out, fresh)
    assert len(pair) == n
    return out


groups = st.lists(st.integers(0, N_WORDS - 1), min_size=1, max_size=25)


@given(st.integers(0, 100_000), groups)
@settings(deadline=None, max_examples=150)
def test_group_predictive_matches_the_scanning_oracle(seed: int, ws: list[int]) -> None:
    s = State(seed)
    n = len(ws)
    n_empty = int(s.ctl[sc.N_EMPTY])
    empties = np.asarray(np.flatnonzero(s.nl < sc.EMPTY_BELOW)[:n], dtype=np.int64)
    arr = np.array(ws, dtype=np.int64)
    psums = np.array([sc.phi_sum(w, s.tw, s.ix, BETA) for w in ws])
    bus = np.array([sc.best_used_topic(w, s.tw, s.ix, BETA, n_empty) for w in ws], np.int64)
    for k in [-1, *range(N_CATS)]:
        got = sc.group_log_predictive(
            arr, k, ZETA, BETA, VBETA, s.tw, s.cat, s.ix, empties, n_empty,
            np.empty(n, np.int64), np.empty(n, np.int64), psums, bus, np.empty(n),
        )  # fmt: skip
        assert math.isclose(got, scan_group(s, ws, k, empties, n_empty), rel_tol=1e-10)
