"""The words' side of the hybrid seating kernel (:mod:`noveld.models.kernels.hybrid`): the
batch's overlay of its own documents' word counts on the postings pool, each slot's Dirichlet–
multinomial log predictive of a document, and the CRP prior's log masses."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.multinomial import log_rising


@njit(cache=True)
def _overlay_add(
    u: int, k: int, c: int, ov_ptr: np.ndarray, ov_slot: np.ndarray, ov_cnt: np.ndarray,
    ov_n: np.ndarray,
) -> None:  # fmt: skip
    """Add ``c`` (negative removes) to the batch's count of local word ``u`` in slot ``k``."""
    s = ov_ptr[u]
    n = ov_n[u]
    for e in range(s, s + n):
        if ov_slot[e] == k:
            ov_cnt[e] += c
            if ov_cnt[e] == 0:  # counts are integers: exactly zero when the last one leaves
                ov_slot[e] = ov_slot[s + n - 1]
                ov_cnt[e] = ov_cnt[s + n - 1]
                ov_n[u] = n - 1
            return
    ov_slot[s + n] = k
    ov_cnt[s + n] = c
    ov_n[u] = n + 1


@njit(cache=True)
def word_terms(
    i: int, doc_ptr: np.ndarray, doc_words: np.ndarray, doc_counts: np.ndarray,
    doc_loc: np.ndarray, n_old: int, live: np.ndarray, head: np.ndarray, nxt: np.ndarray,
    pk: np.ndarray, pc: np.ndarray, g: float, beta: float, ov_ptr: np.ndarray,
    ov_slot: np.ndarray, ov_cnt: np.ndarray, ov_n: np.ndarray, tmp: np.ndarray,
    touched: np.ndarray, wt: np.ndarray,
) -> None:  # fmt: skip
    """Add to ``wt[k]`` (zero elsewhere) batch document ``i``'s word factors, relative to the
    empty cluster, in each live slot sharing a word: :func:`~noveld.models.kernels.multinomial.
    score_document`'s terms, with a cluster's count of a word = pool count × g (old slots) +
    the batch's documents seated there (the overlay)."""
    nv = head.shape[0]
    for j in range(doc_ptr[i], doc_ptr[i + 1]):
        w = doc_words[j]
        c = doc_counts[j]
        nt = 0
        if w < nv:
            e = head[w]
            while e >= 0:
                k = pk[e]
                if k < n_old and live[k] and pc[e] > 0.0:
                    if tmp[k] == 0.0:
                        touched[nt] = k
                        nt += 1
                    tmp[k] += pc[e] * g
                e = nxt[e]
        u = doc_loc[j]
        for e in range(ov_ptr[u], ov_ptr[u] + ov_n[u]):
            k = ov_slot[e]
            if tmp[k] == 0.0:
                touched[nt] = k
                nt += 1
            tmp[k] += ov_cnt[e]
        base = log_rising(beta, c) if c > 1 else 0.0
        for t in range(nt):
            k = touched[t]
            x = tmp[k]
            tmp[k] = 0.0
            if x > 0.0 and live[k]:
                if c == 1:
                    wt[k] += math.log1p(x / beta)
                else:
                    wt[k] += log_rising(x + beta, c) - base


@njit(cache=True)
def word_scores(
    i: int, doc_ptr: np.ndarray, doc_words: np.ndarray, doc_counts: np.ndarray,
    doc_loc: np.ndarray, nd: int, n_old: int, n_slots: int, log_mass: np.ndarray,
    ntok: np.ndarray, live: np.ndarray, head: np.ndarray, nxt: np.ndarray, pk: np.ndarray,
    pc: np.ndarray, g: float, beta: float, vbeta: float, discount: float, log_alpha: float,
    ov_ptr: np.ndarray, ov_slot: np.ndarray, ov_cnt: np.ndarray, ov_n: np.ndarray,
    tmp: np.ndarray, touched: np.ndarray, wt: np.ndarray, lp: np.ndarray, tau: float = 1.0,
) -> float:  # fmt: skip
    """CRP prior × (Dirichlet–multinomial predictive)^τ of batch document ``i`` into
    ``lp[:n_slots]`` (−inf where not live); returns the new-cluster weight. ``log_mass``
    holds each slot's log(max(m_k − d, 1e-3)) (:func:`log_masses`); ``wt`` is zero and left
    so (:func:`word_terms` works in it); ``tau`` tempers the words
    (:func:`~noveld.models.kernels.tempering.length_tempering`)."""
    word_terms(
        i, doc_ptr, doc_words, doc_counts, doc_loc, n_old, live, head, nxt, pk, pc, g, beta,
        ov_ptr, ov_slot, ov_cnt, ov_n, tmp, touched, wt,
    )  # fmt: skip
    n_live = 0
    for k in range(n_slots):
        words = wt[k] - log_rising(ntok[k] + vbeta, nd)
        lp[k] = log_mass[k] + tau * words if live[k] else -np.inf
        n_live += live[k]
        wt[k] = 0.0
    return math.log(math.exp(log_alpha) + discount * n_live) - tau * log_rising(vbeta, nd)


@njit(cache=True)
def log_masses(mass: np.ndarray, discount: float) -> np.ndarray:
    """The CRP prior's log(max(m_k − d, 1e-3)) of every slot (the seating keeps it current)."""
    out = np.empty(mass.shape[0])
    for k in range(mass.shape[0]):
        out[k] = math.log(max(mass[k] - discount, 1e-3))
    return out
