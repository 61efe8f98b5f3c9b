"""numba kernels of the two-level category/topic HDP (LBPL-NTM, paper 000 §3; DESIGN §5.3).

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

This module holds the conditionals, tested against closed forms; the per-batch sampler and the
model around them are not built yet (issue #4).
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
def new_table_weights(
    okl: np.ndarray,
    ok: np.ndarray,
    mk: np.ndarray,
    alive: np.ndarray,
    kmax: int,
    zeta: float,
    gamma: float,
    out: np.ndarray,
) -> None:
    """``out[y] = G(y)``: the predictive of topic y at a new table, its category integrated out
    (``Σ_k m_k f(y|θ_k) + γ/L``, over ``M + γ``)."""
    n_topics = out.shape[0]
    total = gamma
    for y in range(n_topics):
        out[y] = gamma / n_topics
    for k in range(kmax):
        if alive[k] and mk[k] > 0:
            total += mk[k]
            for y in range(n_topics):
                out[y] += mk[k] * (zeta + okl[k, y]) / (n_topics * zeta + ok[k])
    for y in range(n_topics):
        out[y] /= total


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
) -> float:
    """Eq. 6 for one table whose words have topics ``ys``: ``out[k] = log m_k + Σ_n log f(y_n |
    θ_k)`` with the table's own earlier words counted (sequential predictive); returns the new
    category's ``log γ + Σ_n log f(y_n | θ_new)``. The table must already be removed from the
    counts."""
    n_topics = okl.shape[1]
    n = ys.shape[0]
    for k in range(kmax):
        if not alive[k] or mk[k] <= 0:
            out[k] = -np.inf
            continue
        lw = math.log(mk[k])
        for i in range(n):
            own = 0
            for j in range(i):
                if ys[j] == ys[i]:
                    own += 1
            lw += math.log((zeta + okl[k, ys[i]] + own) / (n_topics * zeta + ok[k] + i))
        out[k] = lw
    lw_new = math.log(gamma)
    for i in range(n):
        own = 0
        for j in range(i):
            if ys[j] == ys[i]:
                own += 1
        lw_new += math.log((zeta + own) / (n_topics * zeta + i))
    return lw_new
