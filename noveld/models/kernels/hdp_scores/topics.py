"""The word-level pieces of the hdp batch sampler's predictives: topic predictives φ, a word's
topic (eq. 7), the weighted picks, and a document's context likelihood; with the bundle layout
constants (:mod:`noveld.models.kernels.hdp_scores`)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

Arrays = tuple[np.ndarray, ...]  # a bundle of count or index arrays (numba passes tuples)
EMPTY_BELOW = 0.5  # a topic holding less than half a token is unused
CATS, NEXT_UID, OVERFLOW, N_EMPTY, FIRST_EMPTY = 0, 1, 2, 3, 4
CTL_SIZE = 5


@njit(cache=True, inline="always")
def phi(w: int, y: int, nlw: np.ndarray, inv: np.ndarray, beta: float) -> float:
    """Topic y's predictive of word w, ``(β + n_yw)/(Vβ + n_y)`` (paper 000, eq. 7's likelihood)."""
    return (beta + nlw[w, y]) * inv[y]


@njit(cache=True, inline="always")
def phi_sum(w: int, tw: Arrays, ix: Arrays, beta: float) -> float:
    """``Σ_l φ_l(w) = β Σ_l inv[y] + Σ_{y ∋ w} n_lw inv[y]``."""
    nlw, _, inv, inv_sum = tw
    wz, wz_ptr, wzlen = ix[5], ix[6], ix[7]
    out = beta * inv_sum[0]
    for q in range(wz_ptr[w], wz_ptr[w] + wzlen[w]):
        y = wz[q]
        out += nlw[w, y] * inv[y]
    return out


@njit(cache=True, inline="always")
def best_used_topic(w: int, tw: Arrays, ix: Arrays, beta: float, n_empty: int) -> int:
    """The used topic with the largest ``φ_l(w)``; −1 when none holds w and unused topics exist
    (the unused class then beats every used topic not holding w)."""
    nlw, nl, inv, _ = tw
    wz, wz_ptr, wzlen = ix[5], ix[6], ix[7]
    best, best_v = -1, -1.0
    for q in range(wz_ptr[w], wz_ptr[w] + wzlen[w]):
        y = wz[q]
        if nl[y] < EMPTY_BELOW or nlw[w, y] <= 0.0:
            continue
        v = phi(w, y, nlw, inv, beta)
        if v > best_v or (v == best_v and y < best):
            best, best_v = y, v
    if best < 0 and n_empty == 0:  # every topic used, none holds w: the lightest one
        for y in range(nl.shape[0]):
            v = phi(w, y, nlw, inv, beta)
            if v > best_v:
                best, best_v = y, v
    return best


@njit(cache=True)
def list_unused(ctl: np.ndarray, nl: np.ndarray, n: int, empties: np.ndarray) -> int:
    """The first ``min(n, #unused)`` unused topics in order into ``empties`` (a block of n words
    can claim at most n); returns the number of unused topics."""
    n_empty = ctl[N_EMPTY]
    m = 0
    y = ctl[FIRST_EMPTY]
    while 0 <= y < nl.shape[0] and m < min(n, n_empty):
        if nl[y] < EMPTY_BELOW:
            empties[m] = y
            m += 1
        y += 1
    return n_empty if m == min(n, n_empty) else m  # (fewer found: the bookkeeping is off)


@njit(cache=True)
def pick(weights: np.ndarray, n: int, u: float, deterministic: bool) -> int:
    """Argmax (first of ties: ``deterministic``) or a draw with uniform ``u`` from
    ``weights[:n]`` (non-negative)."""
    if deterministic:
        best = 0
        for i in range(1, n):
            if weights[i] > weights[best]:
                best = i
        return best
    total = 0.0
    for i in range(n):
        total += weights[i]
    target = u * total
    acc = 0.0
    for i in range(n):
        acc += weights[i]
        if acc >= target and weights[i] > 0.0:
            return i
    return n - 1


@njit(cache=True)
def pick_log(logw: np.ndarray, n: int, u: float, deterministic: bool) -> int:
    """:func:`pick` on log weights (−inf allowed); ``logw`` is overwritten."""
    top = -np.inf
    for i in range(n):
        top = max(top, logw[i])
    for i in range(n):
        logw[i] = math.exp(logw[i] - top) if logw[i] > -np.inf else 0.0
    return pick(logw, n, u, deterministic)


@njit(cache=True, inline="always")
def draw_topic(
    w: int, k: int, zeta: float, beta: float, tw: Arrays, cat: Arrays, ix: Arrays,
    ctl: np.ndarray, wts: np.ndarray, u: float, deterministic: bool,
) -> int:  # fmt: skip
    """Eq. 7: the topic of word w at a table serving category k.

    Sampled: over all L topics. MAP: ``(ζ + O_kl) φ_l(w)`` is largest among the category's
    topics, the word's topics, or — every other topic having ``ζ β/(Vβ + n_l)`` — the unused
    class (``#unused × ζ φ``) when it exists; only those are scored. Ties: the lower topic."""
    nlw, nl, inv, _ = tw
    okl = cat[0]
    nz, nzlen, wz, wz_ptr, wzlen = ix[0], ix[1], ix[5], ix[6], ix[7]
    n_topics = nl.shape[0]
    if not deterministic:
        for y in range(n_topics):
            wts[y] = (zeta + okl[k, y]) * phi(w, y, nlw, inv, beta)
        return pick(wts, n_topics, u, False)
    best, best_v = -1, -1.0
    for q in range(nzlen[k]):
        y = nz[k, q]
        if nl[y] >= EMPTY_BELOW:
            v = (zeta + okl[k, y]) * phi(w, y, nlw, inv, beta)
            if v > best_v or (v == best_v and y < best):
                best, best_v = y, v
    for q in range(wz_ptr[w], wz_ptr[w] + wzlen[w]):
        y = wz[q]
        if nl[y] >= EMPTY_BELOW:
            v = (zeta + okl[k, y]) * phi(w, y, nlw, inv, beta)
            if v > best_v or (v == best_v and y < best):
                best, best_v = y, v
    n_empty, e = ctl[N_EMPTY], ctl[FIRST_EMPTY]
    if n_empty > 0:
        return e if n_empty * zeta * phi(w, e, nlw, inv, beta) > best_v else best
    for y in range(n_topics):  # every topic used: one holding neither k nor w may win
        v = (zeta + okl[k, y]) * phi(w, y, nlw, inv, beta)
        if v > best_v:
            best, best_v = y, v
    return best


@njit(cache=True)
def context_log_likelihood(
    d: int, k: int, eta: float, cx: Arrays
) -> float:  # fmt: skip
    """Document d's context under category k (``k < 0``: a new one), a Dirichlet(η)–categorical
    per field (paper 001's context observation at the category level):
    ``Σ_f log (η + c_k,f=v) / (η U_f + c_k,f)``, ``U_f`` the field's distinct values seen.
    ``cx = (ctx_ptr, value column, field column, U, counts[k, column], ...)``."""
    ctx_ptr, col_v, col_f, card, cvk = cx[0], cx[1], cx[2], cx[3], cx[4]
    out = 0.0
    for j in range(ctx_ptr[d], ctx_ptr[d + 1]):
        if k < 0:
            out -= math.log(card[j])
        else:
            out += math.log((eta + cvk[k, col_v[j]]) / (eta * card[j] + cvk[k, col_f[j]]))
    return out
