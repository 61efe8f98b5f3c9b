"""CRP × collapsed Dirichlet–multinomial seating weights of one document, and the choice of a
slot from them, in the log domain and (for short documents) the linear domain.

Scoring walks only the postings of the document's own words: the part that depends on ``n_k``
alone is computed for every cluster in O(K), the word part for clusters sharing a word.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

_PRODUCT_MAX_TERMS = 16


@njit(cache=True, inline="always")
def log_rising(x: float, n: int) -> float:
    """``log Γ(x+n) − log Γ(x)`` for integer ``n ≥ 0`` (the rising factorial in paper 004 eq. 4)."""
    if n <= _PRODUCT_MAX_TERMS:
        p = 1.0
        for i in range(n):
            p *= x + i
        return math.log(p)
    return math.lgamma(x + n) - math.lgamma(x)


@njit(cache=True)
def score_document(
    words: np.ndarray,
    counts: np.ndarray,
    nd: int,
    lp: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    kmax: int,
    g: float,
    beta: float,
    vbeta: float,
    log_alpha_new: float,
    discount: float = 0.0,
    tau: float = 1.0,
) -> float:
    """Fill ``lp[:kmax]`` with unnormalised log seating weights; return the new-cluster weight.

    Implements the CRP × collapsed Dirichlet–multinomial predictive (paper 004 eq. 4, with the
    DP prior ``m_k`` / ``α`` in place of the finite ``α_j + n_j − 1``)::

        log p(z=k) = log m_k − log Γ(n_k+Vβ+N_d)/Γ(n_k+Vβ)
                     + Σ_w [log Γ(n_kw+β+N_dw)/Γ(n_kw+β) − log Γ(β+N_dw)/Γ(β)]
        log p(z=new) = log α − log Γ(Vβ+N_d)/Γ(Vβ)

    The per-word term is written relative to the empty cluster, so it is zero for every cluster
    that does not contain the word and only postings need visiting. Dead slots get ``-inf``.
    ``tau`` < 1 raises the words' predictive (both lines' Γ terms) to that power, the prior
    untouched (:func:`~noveld.models.kernels.tempering.document_tempering`).
    """
    tempered = tau != 1.0
    n_alive = 0
    for k in range(kmax):
        if alive[k]:
            n_alive += 1
            words0 = -log_rising(ntok[k] * g + vbeta, nd)
            lp[k] = words0 if tempered else math.log(max(m[k] * g - discount, 1e-3)) + words0
        else:
            lp[k] = -np.inf
    nv = head.shape[0]
    for j in range(words.shape[0]):
        w = words[j]
        if w >= nv:
            continue
        c = counts[j]
        base = log_rising(beta, c) if c > 1 else 0.0
        e = head[w]
        while e >= 0:
            k = pk[e]
            x = pc[e] * g
            if x > 0.0 and alive[k]:
                if c == 1:
                    lp[k] += math.log1p(x / beta)
                else:
                    lp[k] += log_rising(x + beta, c) - base
            e = nxt[e]
    if tempered:
        for k in range(kmax):
            if alive[k]:
                lp[k] = math.log(max(m[k] * g - discount, 1e-3)) + tau * lp[k]
    a_new = math.exp(log_alpha_new) + discount * n_alive
    return math.log(a_new) - tau * log_rising(vbeta, nd)


@njit(cache=True)
def choose(
    lp: np.ndarray,
    kmax: int,
    lp_new: float,
    u: float,
    deterministic: bool,
    out: np.ndarray,
    uid: np.ndarray,
) -> int:
    """Draw a slot from ``softmax([lp[:kmax], lp_new])`` with uniform ``u`` (or take the argmax).

    Returns ``-1`` for a new cluster. In MAP mode a tie with the new cluster goes to the new
    cluster and ties between clusters to the lowest (oldest) uid — not the lowest slot, which
    depends on slot reuse — so a restarted or replicated model with another slot layout chooses
    the same way. A tie is a difference within ``TIE_TOL``: equal predictives whose factors
    differ (``(1+β)/β · (2+β)/β`` from two words, or from one word seen twice) round apart.
    ``out`` receives ``[log Σ exp(lp), lp_new − max_k lp_k]`` (the log normaliser and the
    novelty margin).
    """
    best = lp_new
    best_k = -1
    best_old = -np.inf
    for k in range(kmax):
        v = lp[k]
        if v > best_old:
            best_old = v
        if v > best + TIE_TOL or (v >= best - TIE_TOL and best_k >= 0 and uid[k] < uid[best_k]):
            best = v
            best_k = k
    top = max(lp_new, best_old)  # the normaliser's shift; ``best`` may sit TIE_TOL below it
    total = math.exp(lp_new - top)
    for k in range(kmax):
        if lp[k] > -np.inf:
            total += math.exp(lp[k] - top)
    out[0] = top + math.log(total)
    out[1] = min(lp_new - best_old, MARGIN_CAP)
    if deterministic:
        return best_k
    target = u * total
    acc = 0.0
    for k in range(kmax):
        if lp[k] > -np.inf:
            acc += math.exp(lp[k] - top)
            if acc >= target:
                return k
    return -1


MARGIN_CAP = 1000.0
TIE_TOL = 1e-9
"""MAP ties: log weights this close (linear weights this close relatively) count as equal. The
rounding of a predictive is ~1e-13 of its size, far below; real preferences are far above."""


def keeps_its_seat(
    lp: np.ndarray, kmax: int, k: int, loo: float, lp_new: float, uid: np.ndarray
) -> bool:
    """Would MAP seating (:func:`choose`'s tie rule) pick slot ``k``, scored ``loo`` with the
    document taken out of it, over the others' ``lp[:kmax]`` and a new cluster's ``lp_new``?"""
    if not loo > lp_new + TIE_TOL:  # a tie goes to a new cluster
        return False
    own = int(uid[k])
    for j in range(kmax):
        if j != k and lp[j] >= loo - TIE_TOL and (lp[j] > loo + TIE_TOL or int(uid[j]) < own):
            return False  # another scores higher, or as high with an older uid
    return True


LINEAR_MAX_LEN = 16


@njit(cache=True)
def score_document_linear(
    words: np.ndarray,
    counts: np.ndarray,
    nd: int,
    wt: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    kmax: int,
    g: float,
    beta: float,
    vbeta: float,
    alpha_new: float,
    discount: float,
) -> float:
    """Linear-domain twin of :func:`score_document` for ``nd ≤ LINEAR_MAX_LEN`` (the hot path).

    ``wt[k] = exp(lp[k])`` and the return value is ``exp(lp_new)``: the rising factorials are
    plain products, so a document costs no logarithm per cluster. Short documents keep every
    factor within float64 range (products of at most 16 terms), which is why longer ones take
    the log-domain path.
    """
    n_alive = 0
    for k in range(kmax):
        if alive[k]:
            n_alive += 1
            x = ntok[k] * g + vbeta
            p = 1.0
            for i in range(nd):
                p *= x + i
            wt[k] = max(m[k] * g - discount, 1e-3) / p
        else:
            wt[k] = 0.0
    nv = head.shape[0]
    for j in range(words.shape[0]):
        w = words[j]
        if w >= nv:
            continue
        c = counts[j]
        e = head[w]
        while e >= 0:
            k = pk[e]
            x = pc[e] * g
            if x > 0.0 and alive[k]:
                if c == 1:
                    wt[k] *= 1.0 + x / beta
                else:
                    f = 1.0
                    for i in range(c):
                        f *= (x + beta + i) / (beta + i)
                    wt[k] *= f
            e = nxt[e]
    p = 1.0
    for i in range(nd):
        p *= vbeta + i
    return (alpha_new + discount * n_alive) / p


@njit(cache=True)
def choose_linear(
    wt: np.ndarray,
    kmax: int,
    w_new: float,
    u: float,
    deterministic: bool,
    out: np.ndarray,
    uid: np.ndarray,
) -> int:
    """:func:`choose` for linear weights; same tie-breaking (``TIE_TOL`` relative), same ``out``
    (log normaliser, novelty margin capped at ``MARGIN_CAP`` when there is no cluster yet)."""
    best = w_new
    best_k = -1
    best_old = 0.0
    total = w_new
    for k in range(kmax):
        v = wt[k]
        total += v
        if v > best_old:
            best_old = v
        if v > best * (1.0 + TIE_TOL) or (
            v >= best * (1.0 - TIE_TOL) and best_k >= 0 and uid[k] < uid[best_k]
        ):
            best = v
            best_k = k
    out[0] = math.log(total)
    out[1] = min(math.log(w_new) - math.log(best_old), MARGIN_CAP) if best_old > 0 else MARGIN_CAP
    if deterministic:
        return best_k
    target = u * total
    acc = 0.0
    for k in range(kmax):
        acc += wt[k]
        if wt[k] > 0.0 and acc >= target:
            return k
    return -1


@njit(cache=True)
def word_baseline(counts: np.ndarray, beta: float) -> float:
    """``Σ log Γ(β+c)/Γ(β)`` over (document, word) counts: the empty-cluster word term of
    paper 004 eq. 4, which the seating scores leave out (a count of 1 contributes log β)."""
    s = 0.0
    for c in counts:
        if c >= 1:
            s += log_rising(beta, c)
    return s
