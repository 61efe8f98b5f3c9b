"""Merge moves: the posterior gain of merging each young cluster into each live one, and the
move of one cluster's counts into another.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.multinomial.pool import find_or_alloc


@njit(cache=True)
def merge_gains(
    young: np.ndarray,
    scan_words: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    kmax: int,
    scale: float,
    beta: float,
    vbeta: float,
    log_new: float,
    discount: float,
    gains: np.ndarray,
) -> None:
    """Log posterior ratio of merging each young cluster into each live cluster (MAP merge test).

    ``gains[i, k] = log p(z with y_i ∪ k) − log p(z)`` under the collapsed Dirichlet–multinomial
    marginal (paper 004 eq. A.8, from which its eq. 3 is derived) and the Pitman–Yor/CRP
    partition prior::

        Δlik = −lgΓ(Vβ) − lgΓ(Vβ+n_y+n_k) + lgΓ(Vβ+n_y) + lgΓ(Vβ+n_k)
               + Σ_{w shared} [lgΓ(β+a_w+b_w) − lgΓ(β+a_w) − lgΓ(β+b_w) + lgΓ(β)]
        Δprior = lgΓ(m_y+m_k−d) + lgΓ(1−d) − lgΓ(m_y−d) − lgΓ(m_k−d) − log(θ + d(K−1))

    ``log_new`` is the caller's ``log(θ + d(K−1))`` (K live clusters before the merge). Every
    m − d is floored at 1e-3, as in seating: under forgetting a faded cluster's mass can fall
    below d, where Γ(m − d) is negative and the EPPF has no logarithm.

    Words only one of the two clusters holds cancel, so only the postings lists of
    ``scan_words`` (every word of the young clusters) are walked. ``gains[i, k]`` is −inf for
    dead clusters, for ``k = young[i]`` and for clusters sharing no word with ``young[i]``.
    """
    ny = young.shape[0]
    pos = np.full(kmax, -1, dtype=np.int64)
    for i in range(ny):
        pos[young[i]] = i
    lgb = math.lgamma(beta)
    acc = np.zeros((ny, kmax))
    touched = np.zeros((ny, kmax), dtype=np.bool_)
    ys = np.empty(ny, dtype=np.int64)
    ya = np.empty(ny)
    for j in range(scan_words.shape[0]):
        w = scan_words[j]
        if w >= head.shape[0]:
            continue
        n_here = 0
        e = head[w]
        while e >= 0:
            k = pk[e]
            if k < kmax and pos[k] >= 0 and pc[e] > 0.0:
                ys[n_here] = pos[k]
                ya[n_here] = pc[e] * scale
                n_here += 1
            e = nxt[e]
        for t in range(n_here):
            a = ya[t]
            base = lgb - math.lgamma(beta + a)
            e = head[w]
            while e >= 0:
                k = pk[e]
                if k < kmax and alive[k] and pc[e] > 0.0 and k != young[ys[t]]:
                    b = pc[e] * scale
                    acc[ys[t], k] += math.lgamma(beta + a + b) - math.lgamma(beta + b) + base
                    touched[ys[t], k] = True
                e = nxt[e]
    lg_vb = math.lgamma(vbeta)
    lg_1d = math.lgamma(1.0 - discount)
    for i in range(ny):
        y = young[i]
        ny_tok = ntok[y] * scale
        my = m[y] * scale
        for k in range(kmax):
            # no shared word: the likelihood ratio is ≤ 0 (lgΓ is convex) and in practice far
            # below any prior gain, so such pairs are not merge candidates
            if not touched[i, k] or not alive[k] or k == y or not alive[y]:
                gains[i, k] = -np.inf
                continue
            nk_tok = ntok[k] * scale
            mk = m[k] * scale
            lik = (
                -lg_vb
                - math.lgamma(vbeta + ny_tok + nk_tok)
                + math.lgamma(vbeta + ny_tok)
                + math.lgamma(vbeta + nk_tok)
                + acc[i, k]
            )
            prior = (
                math.lgamma(max(my + mk - discount, 1e-3))
                + lg_1d
                - math.lgamma(max(my - discount, 1e-3))
                - math.lgamma(max(mk - discount, 1e-3))
                - log_new
            )
            gains[i, k] = lik + prior


@njit(cache=True)
def move_cluster(
    src: int,
    dst: int,
    m: np.ndarray,
    ntok: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    ictl: np.ndarray,
    scan_words: np.ndarray,
    out_words: np.ndarray,
    out_counts: np.ndarray,
) -> int:
    """Move every count of cluster ``src`` into ``dst`` (a merge); ``src`` ends empty.

    ``scan_words`` must hold every word of ``src``. Writes the moved (word, raw count) pairs to
    ``out_words``/``out_counts`` and returns how many, so the caller can record the move in
    the batch delta.
    """
    n = 0
    for j in range(scan_words.shape[0]):
        w = scan_words[j]
        if w >= head.shape[0]:
            continue
        e = head[w]
        while e >= 0:
            if pk[e] == src and pc[e] != 0.0:
                c = pc[e]
                pc[e] = 0.0
                d = find_or_alloc(w, dst, head, nxt, pk, pc, ictl)
                pc[d] += c
                out_words[n] = w
                out_counts[n] = c
                n += 1
                break
            e = nxt[e]
    m[dst] += m[src]
    ntok[dst] += ntok[src]
    m[src] = 0.0
    ntok[src] = 0.0
    return n
