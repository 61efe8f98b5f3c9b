"""numba kernels of the two-level category/topic HDP (LBPL-NTM, paper 000 §3).

L topics ``φ_l ~ Dir(β)`` over words; categories ``θ_k ~ Dir(ζ)`` over topics; each document is a
restaurant of the Chinese restaurant franchise whose tables serve categories, and each word
draws a topic ``y ~ θ_{k_t}`` of its table's category and the word from ``φ_y``. Counts:
``nlw`` (topic × word), ``nl`` (topic totals), ``okl`` (category × topic), ``ok`` (category
totals), ``mk`` (tables serving category k). Conditionals (paper 000):

- eq. 4/5: ``f(y | θ_k) = (ζ + O_ky) / (Lζ + O_k)``, new category ``1/L``
- eq. 3: table of a word ∝ ``s_t f(y | θ_{k_t})``, new table ∝ ``α G(y)`` with
  ``G(y) = (Σ_k m_k f(y|θ_k) + γ/L) / (M + γ)`` (the new table's category integrated out)
- eq. 6: category of a table ∝ ``m_k Π_{n at t} f(y_n | θ_k)`` (sequentially, counts updated
  word by word), new ∝ ``γ Π f(y_n | θ_new)``
- eq. 7: topic of a word ∝ ``f(l | θ_{k_t}) (β + n_lw)/(Vβ + n_l)``

This module holds eqs. 4–6 as the sampler uses them, tested against closed forms, and the
densifying gather; the per-batch sampler is :mod:`noveld.models.kernels.hdp_sampler`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit


@njit(cache=True)
def f_topic(k: int, y: int, okl: np.ndarray, ok: np.ndarray, zeta: float, n_topics: int) -> float:
    """Eq. 4 (k ≥ 0) / eq. 5 (k < 0: a new category): predictive of topic y under category k."""
    if k < 0:
        return 1.0 / n_topics
    return (zeta + okl[k, y]) / (n_topics * zeta + ok[k])


@njit(cache=True)
def table_weight(m: float, discount: float) -> float:
    """The CRP weight of an existing category with ``m`` tables under the Pitman–Yor prior
    (discount d; d = 0 is the DP of eq. 2): ``m − d``, floored at 1e-3 for categories whose
    decayed mass fell below d (as ``dpmm``'s seating)."""
    return max(m - discount, 1e-3)


@njit(cache=True)
def new_category_weight(
    gamma: float, discount: float, mk: np.ndarray, alive: np.ndarray, kmax: int
) -> float:
    """The CRP weight of a new category: ``γ + d·K`` with K the live categories (γ for the DP)."""
    if discount == 0.0:
        return gamma
    n_live = 0
    for k in range(kmax):
        if alive[k] and mk[k] > 0.0:
            n_live += 1
    return gamma + discount * n_live


@njit(cache=True)
def table_category_logweights(
    ys: np.ndarray,
    okl: np.ndarray,
    ok: np.ndarray,
    mk: np.ndarray,
    alive: np.ndarray,
    kmax: int,
    zeta: float,
    gamma: float,
    out: np.ndarray,
    discount: float = 0.0,
    tau: float = 1.0,
) -> float:
    """Eq. 6 for one table whose words have topics ``ys``: ``out[k] = log m_k + τ Σ_n log f(y_n |
    θ_k)`` with the table's own earlier words counted (sequential predictive); returns the new
    category's ``log γ + τ Σ_n log f(y_n | θ_new)``. The table must already be removed from the
    counts. With a Pitman–Yor ``discount`` d, ``m_k − d`` and ``γ + d·K`` replace ``m_k``, ``γ``;
    ``tau`` (1: none) is the length tempering."""
    n_topics = okl.shape[1]
    n = ys.shape[0]
    for k in range(kmax):
        if not alive[k] or mk[k] <= 0:
            out[k] = -np.inf
            continue
        lw = 0.0
        for i in range(n):
            own = 0
            for j in range(i):
                if ys[j] == ys[i]:
                    own += 1
            lw += math.log((zeta + okl[k, ys[i]] + own) / (n_topics * zeta + ok[k] + i))
        out[k] = math.log(table_weight(mk[k], discount)) + tau * lw
    lw_new = 0.0
    for i in range(n):
        own = 0
        for j in range(i):
            if ys[j] == ys[i]:
                own += 1
        lw_new += math.log((zeta + own) / (n_topics * zeta + i))
    return math.log(new_category_weight(gamma, discount, mk, alive, kmax)) + tau * lw_new


@njit(cache=True)
def gather_postings(
    words: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    row_of_slot: np.ndarray,
    scale: float,
    out: np.ndarray,
    by_word: bool = False,
) -> None:
    """Densify part of a :class:`MultinomialStats` pool: ``out[row_of_slot[k], j] = n_k,words[j]``
    (true units; ``out[j, row_of_slot[k]]`` with ``by_word``) for the slots ``k`` with a row
    (``row_of_slot[k] ≥ 0``), walking only the postings of ``words``. ``out`` starts at zero."""
    nv = head.shape[0]
    n_slots = row_of_slot.shape[0]
    for j in range(words.shape[0]):
        w = words[j]
        if w < 0 or w >= nv:
            continue
        e = head[w]
        while e >= 0:
            k = pk[e]
            if k < n_slots and row_of_slot[k] >= 0 and pc[e] > 0.0:
                if by_word:
                    out[j, row_of_slot[k]] += pc[e] * scale
                else:
                    out[row_of_slot[k], j] += pc[e] * scale
            e = nxt[e]


@njit(cache=True)
def gather_indexed(
    words: np.ndarray,
    topic_words: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    topic_of_slot: np.ndarray,
    cat_of_slot: np.ndarray,
    scale: float,
    word_tokens: np.ndarray,
    nlw: np.ndarray,
    okl: np.ndarray,
) -> tuple[np.ndarray, ...]:
    """Densify a batch's counts from the pool and index them in one walk of the postings of
    its words and of the topic entries (layout: :mod:`noveld.models.kernels.hdp_scores`):
    ``nlw[j, y] = n_{y, words[j]}`` with each word's topics (room for ``word_tokens[j]`` more:
    a token adds at most one), and ``okl[k, y] = O_ky`` with each category's topics and each
    topic's categories. ``topic_of_slot`` / ``cat_of_slot`` map pool slots to topic numbers /
    local categories (−1: neither); ``nlw`` and ``okl`` start at zero."""
    cap, n_topics = okl.shape
    n_words = words.shape[0]
    nv = head.shape[0]
    n_slots = topic_of_slot.shape[0]
    wzlen = np.zeros(n_words, dtype=np.int64)
    for j in range(n_words):
        w = words[j]
        e = head[w] if 0 <= w < nv else -1
        while e >= 0:
            k = pk[e]
            if k < n_slots and topic_of_slot[k] >= 0 and pc[e] > 0.0:
                if nlw[j, topic_of_slot[k]] == 0.0:
                    wzlen[j] += 1
                nlw[j, topic_of_slot[k]] += pc[e] * scale
            e = nxt[e]
    wz_ptr = np.zeros(n_words + 1, dtype=np.int64)
    for j in range(n_words):
        wz_ptr[j + 1] = wz_ptr[j] + wzlen[j] + word_tokens[j] + 1
    wz = np.zeros(wz_ptr[n_words], dtype=np.int64)
    for j in range(n_words):
        q = wz_ptr[j]
        for y in range(n_topics):
            if nlw[j, y] > 0.0:
                wz[q] = y
                q += 1
    # the topic lists are read only up to their lengths: no need to clear (cap × L) entries
    nz = np.empty((cap, n_topics), dtype=np.int64)
    nzlen = np.zeros(cap, dtype=np.int64)
    innz = np.zeros((cap, n_topics), dtype=np.bool_)
    cz = np.empty((n_topics, cap), dtype=np.int64)
    czlen = np.zeros(n_topics, dtype=np.int64)
    for y in range(topic_words.shape[0]):
        w = topic_words[y]
        e = head[w] if 0 <= w < nv else -1
        while e >= 0:
            k = pk[e]
            if k < n_slots and cat_of_slot[k] >= 0 and pc[e] > 0.0:
                r = cat_of_slot[k]
                okl[r, y] += pc[e] * scale
                if not innz[r, y]:
                    innz[r, y] = True
                    nz[r, nzlen[r]] = y
                    nzlen[r] += 1
                    cz[y, czlen[y]] = r
                    czlen[y] += 1
            e = nxt[e]
    return nz, nzlen, innz, cz, czlen, wz, wz_ptr, wzlen
