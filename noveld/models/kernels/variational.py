"""numba kernels of the streaming variational DP mixture (``svi``, paper 001).

Statistics live in the same postings pool as the collapsed model (``kernels.multinomial``):
the expected counts ``s_kw`` with ``λ_kw = β + s_kw``, ``m_k`` (expected documents, ``a_k = 1 +
m_k``) and ``n_k = Σ_w s_kw``; all raw, true = raw × scale.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.multinomial import add_document, open_cluster, score_document
from noveld.models.kernels.tempering import document_tempering


@njit(cache=True)
def digamma(x: float) -> float:
    """ψ(x) for x > 0: the recurrence ψ(x) = ψ(x+1) − 1/x up to x ≥ 6, then the asymptotic
    series (error < 1e-12 there)."""
    acc = 0.0
    while x < 6.0:
        acc -= 1.0 / x
        x += 1.0
    inv = 1.0 / x
    inv2 = inv * inv
    series = inv2 * (
        1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (1.0 / 240 - inv2 / 132)))
    )
    return acc + math.log(x) - 0.5 * inv - series


@njit(cache=True)
def expected_log_sticks(m_sorted: np.ndarray, alpha: float, out: np.ndarray) -> float:
    """``E[log π_k]`` of the truncated stick-breaking posterior, clusters in stick order.

    ``q(v_k) = Beta(a_k, b_k)`` with ``a_k = 1 + m_k`` and ``b_k = α + Σ_{j>k} m_j`` (the
    mean-field stick update of paper 001 eq. 2 for expected counts ``m``, the fixed point of its
    eq. 4 gradient step); ``E[log π_k] = E[log v_k] +
    Σ_{j<k} E[log(1−v_j)]``, ``E[log v] = ψ(a) − ψ(a+b)``, ``E[log(1−v)] = ψ(b) − ψ(a+b)``.
    Returns ``E[log π]`` of a component appended after the last one (``a = 2, b = α``).
    """
    tail = 0.0
    for k in range(m_sorted.shape[0]):
        tail += m_sorted[k]
    prefix = 0.0
    for k in range(m_sorted.shape[0]):
        tail -= m_sorted[k]
        a = 1.0 + m_sorted[k]
        b = alpha + tail
        dab = digamma(a + b)
        out[k] = prefix + digamma(a) - dab
        prefix += digamma(b) - dab
    return prefix + digamma(2.0) - digamma(2.0 + alpha)


@njit(cache=True)
def variational_scores(
    words: np.ndarray,
    counts: np.ndarray,
    nd: int,
    vs: np.ndarray,
    elogpi: np.ndarray,
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
    tau: float = 1.0,
) -> None:
    """``vs[k] = E[log π_k] + τ Σ_w N_dw E[log θ_kw]`` (paper 001's local step; τ = 1 untempered,
    else the length tempering of the seating), with ``E[log θ_kw] = ψ(β + s_kw) − ψ(Vβ + n_k)``:
    the ψ(β) part is shared by every cluster without the word, so only postings of the
    document's words are visited."""
    psi_b = digamma(beta)
    tempered = tau != 1.0
    for k in range(kmax):
        if alive[k]:
            words0 = nd * (psi_b - digamma(vbeta + ntok[k] * g))
            vs[k] = words0 if tempered else elogpi[k] + words0
        else:
            vs[k] = -np.inf
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
                vs[k] += c * (digamma(beta + x) - psi_b)
            e = nxt[e]
    if tempered:
        for k in range(kmax):
            if alive[k]:
                vs[k] = elogpi[k] + tau * vs[k]


@njit(cache=True)
def svi_local_step(
    ptr: np.ndarray,
    words: np.ndarray,
    counts: np.ndarray,
    lengths: np.ndarray,
    log_alpha_new: float,
    beta: float,
    vbeta: float,
    g: float,
    discount: float,
    elogpi: np.ndarray,
    elogpi_new: float,
    top: int,
    use_vb: bool,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    fresh: np.ndarray,
    uid: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    free_stack: np.ndarray,
    ictl: np.ndarray,
    lp: np.ndarray,
    vs: np.ndarray,
    r_slot: np.ndarray,
    r_val: np.ndarray,
    log_norm: np.ndarray,
    margin: np.ndarray,
    forced: np.ndarray,
    n_sweeps: int,
    concentration: float = 0.0,
) -> None:
    """Responsibilities of a batch's documents, in arrival order, then ``n_sweeps`` passes that
    take each document out and recompute its responsibilities against all the others (CVB0's
    coordinate updates restricted to the batch, the analogue of ``dpmm``'s Gibbs sweeps).

    Birth test: the dpmm's CRP seating against the current expected counts
    (``score_document``); when the new cluster wins, the document founds a component with
    ``r = 1``. Otherwise ``r_dk ∝ exp(variational_scores)`` (``use_vb``, paper 001's mean-field
    local step) or ``r_dk ∝`` the collapsed predictive at the expected counts (CVB0, Asuncion et
    al. 2009; Foulds et al. 2013's SCVB0), over the ``top`` best components
    (the rest of the mass is below e^-30 of the best and dropped). Each document's ``r``-weighted
    counts are added with raw weight ``r / g`` as it is processed, so later documents of the
    batch see earlier ones (the sequential variational approximation); the caller turns these
    provisional counts into the natural-gradient step. ``r_slot[d, :]`` is −1 past the kept ones.
    ``concentration`` (s > 0) tempers each document's words by its length, in the birth test
    and in the responsibilities alike (:func:`~noveld.models.kernels.tempering.
    document_tempering`).
    """
    kmax_cap = m.shape[0]
    for sweep in range(n_sweeps + 1):
        for d in range(lengths.shape[0]):
            if sweep > 0:
                if forced[d] >= 0:
                    continue
                for t in range(top):
                    k = r_slot[d, t]
                    if k >= 0:
                        add_document(
                            k,
                            words[ptr[d] : ptr[d + 1]],
                            counts[ptr[d] : ptr[d + 1]],
                            lengths[d],
                            -r_val[d, t] / g,
                            m,
                            ntok,
                            head,
                            nxt,
                            pk,
                            pc,
                            ictl,
                        )
            _seat_one(
                d, sweep, ptr, words, counts, lengths, log_alpha_new, beta, vbeta, g, discount,
                elogpi, elogpi_new, top, use_vb, m, ntok, alive, fresh, uid, head, nxt, pk, pc,
                free_stack, ictl, lp, vs, r_slot, r_val, log_norm, margin, forced, kmax_cap,
                document_tempering(lengths[d], concentration),
            )  # fmt: skip


@njit(cache=True)
def _seat_one(
    d: int,
    sweep: int,
    ptr: np.ndarray,
    words: np.ndarray,
    counts: np.ndarray,
    lengths: np.ndarray,
    log_alpha_new: float,
    beta: float,
    vbeta: float,
    g: float,
    discount: float,
    elogpi: np.ndarray,
    elogpi_new: float,
    top: int,
    use_vb: bool,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    fresh: np.ndarray,
    uid: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    free_stack: np.ndarray,
    ictl: np.ndarray,
    lp: np.ndarray,
    vs: np.ndarray,
    r_slot: np.ndarray,
    r_val: np.ndarray,
    log_norm: np.ndarray,
    margin: np.ndarray,
    forced: np.ndarray,
    kmax_cap: int,
    tau: float,
) -> None:
    """Responsibilities of document ``d`` (see :func:`svi_local_step`), then add it; ``tau``
    tempers its words."""
    wd = words[ptr[d] : ptr[d + 1]]
    cd = counts[ptr[d] : ptr[d + 1]]
    nd = lengths[d]
    kmax = ictl[1]
    lp_new = score_document(
        wd,
        cd,
        nd,
        lp,
        m,
        ntok,
        alive,
        head,
        nxt,
        pk,
        pc,
        kmax,
        g,
        beta,
        vbeta,
        log_alpha_new,
        discount,
        tau,
    )
    best = -np.inf
    for k in range(kmax):
        if lp[k] > best:
            best = lp[k]
    hi = max(best, lp_new)
    s = math.exp(lp_new - hi)
    for k in range(kmax):
        if lp[k] > -np.inf:
            s += math.exp(lp[k] - hi)
    if sweep == 0:
        log_norm[d] = hi + math.log(s)
        margin[d] = lp_new - best if best > -np.inf else 1000.0
    for t in range(top):
        r_slot[d, t] = -1
        r_val[d, t] = 0.0
    if forced[d] >= 0:  # a known label's component
        r_slot[d, 0] = forced[d]
        r_val[d, 0] = 1.0
        margin[d] = -1000.0
    elif lp_new >= best or kmax == 0:
        k = open_cluster(alive, uid, fresh, free_stack, ictl)
        if k >= kmax_cap:
            raise ValueError("svi_local_step: cluster capacity exceeded (reserve first)")
        elogpi[k] = elogpi_new
        r_slot[d, 0] = k
        r_val[d, 0] = 1.0
    else:
        if use_vb:
            variational_scores(
                wd, cd, nd, vs, elogpi, ntok, alive, head, nxt, pk, pc, kmax, g, beta, vbeta, tau
            )
        else:  # CVB0: the collapsed predictive at the expected counts (already in lp)
            for k in range(kmax):
                vs[k] = lp[k]
        # the `top` best components by partial selection
        vmax = -np.inf
        for t in range(top):
            kb = -1
            vb = -np.inf
            for k in range(kmax):
                if vs[k] > vb:
                    already = False
                    for u in range(t):
                        if r_slot[d, u] == k:
                            already = True
                    if not already:
                        vb = vs[k]
                        kb = k
            if kb < 0:
                break
            if t == 0:
                vmax = vb
            elif vb < vmax - 30.0:
                break
            r_slot[d, t] = kb
            r_val[d, t] = vb
        tot = 0.0
        for t in range(top):
            if r_slot[d, t] >= 0:
                r_val[d, t] = math.exp(r_val[d, t] - vmax)
                tot += r_val[d, t]
        for t in range(top):
            if r_slot[d, t] >= 0:
                r_val[d, t] /= tot
    for t in range(top):
        k = r_slot[d, t]
        if k >= 0:
            add_document(k, wd, cd, nd, r_val[d, t] / g, m, ntok, head, nxt, pk, pc, ictl)


@njit(cache=True)
def harden_responsibilities(
    ptr: np.ndarray,
    words: np.ndarray,
    counts: np.ndarray,
    lengths: np.ndarray,
    r_slot: np.ndarray,
    r_val: np.ndarray,
    forced: np.ndarray,
    g: float,
    m: np.ndarray,
    ntok: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    ictl: np.ndarray,
) -> None:
    """Give each document wholly to its most responsible component (``r = 1`` on
    ``r_slot[d, 0]``), moving its provisional ``r``-weighted counts there from the others."""
    for d in range(lengths.shape[0]):
        if forced[d] >= 0 or r_slot[d, 1] < 0:
            continue
        wd = words[ptr[d] : ptr[d + 1]]
        cd = counts[ptr[d] : ptr[d + 1]]
        for t in range(1, r_slot.shape[1]):
            k = r_slot[d, t]
            if k < 0:
                continue
            r = r_val[d, t]
            add_document(k, wd, cd, lengths[d], -r / g, m, ntok, head, nxt, pk, pc, ictl)
            add_document(r_slot[d, 0], wd, cd, lengths[d], r / g, m, ntok, head, nxt, pk, pc, ictl)
            r_slot[d, t] = -1
            r_val[d, t] = 0.0
        r_val[d, 0] = 1.0
