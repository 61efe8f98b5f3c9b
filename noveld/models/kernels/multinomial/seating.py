"""Seating a batch: one-pass CRP seating of each document, then collapsed Gibbs sweeps that
reseat the batch's documents from their complete conditionals.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.multinomial.pool import (
    KMAX,
    NFREE,
    _close_if_empty,
    add_document,
    open_cluster,
)
from noveld.models.kernels.multinomial.predictive import (
    LINEAR_MAX_LEN,
    MARGIN_CAP,
    choose,
    choose_linear,
    score_document,
    score_document_linear,
)
from noveld.models.kernels.tempering import document_tempering


@njit(cache=True, inline="always")
def _score_and_choose(
    words: np.ndarray,
    counts: np.ndarray,
    nd: int,
    u: float,
    deterministic: bool,
    log_alpha: float,
    alpha_new: float,
    beta: float,
    vbeta: float,
    g: float,
    discount: float,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    uid: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    ictl: np.ndarray,
    lp: np.ndarray,
    out: np.ndarray,
    tau: float,
) -> int:
    """Score one document against every cluster and a new one, then choose (slot, or −1 for a
    new cluster): the linear-domain path for short untempered documents, the log domain
    otherwise (its words' predictive to the power ``tau``)."""
    kmax = ictl[KMAX]
    if nd <= LINEAR_MAX_LEN and tau == 1.0:
        w_new = score_document_linear(
            words, counts, nd, lp, m, ntok, alive, head, nxt, pk, pc, kmax, g, beta, vbeta,
            alpha_new, discount,
        )  # fmt: skip
        return choose_linear(lp, kmax, w_new, u, deterministic, out, uid)
    lp_new = score_document(
        words, counts, nd, lp, m, ntok, alive, head, nxt, pk, pc, kmax, g, beta, vbeta,
        log_alpha, discount, tau,
    )  # fmt: skip
    return choose(lp, kmax, lp_new, u, deterministic, out, uid)


@njit(cache=True)
def seat_batch(
    doc_ptr: np.ndarray,
    doc_words: np.ndarray,
    doc_counts: np.ndarray,
    doc_len: np.ndarray,
    uniforms: np.ndarray,
    n_sweeps: int,
    log_alpha: float,
    beta: float,
    vbeta: float,
    deterministic: bool,
    g: float,
    discount: float,
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
    assign: np.ndarray,
    log_norm: np.ndarray,
    margin: np.ndarray,
    forced: np.ndarray,
    concentration: float = 0.0,
) -> None:
    """Sequentially seat a batch by CRP, then run ``n_sweeps`` collapsed Gibbs sweeps over it.

    The first pass is the one-pass CRP seating; each sweep removes every batch
    document from its cluster and reseats it from the complete conditional (paper 004, Algorithm
    1, restricted to the current batch, with a new-cluster option: :func:`reseat_documents`).
    ``assign`` receives slots.
    ``uniforms`` must hold ``len(doc_len) * (1 + n_sweeps)`` draws. From the first pass,
    ``log_norm[d]`` gets the log normaliser of the seating weights (for the log predictive) and
    ``margin[d]`` the new-cluster margin ``lp_new − max_k lp_k`` (the novelty score).
    A document with ``forced[d] ≥ 0`` (a known label's cluster slot) is seated there and never
    moved; its weights are still computed for ``log_norm``. ``concentration`` (s > 0) tempers
    each document's words predictive by its length
    (:func:`~noveld.models.kernels.tempering.document_tempering`).
    """
    nb = doc_len.shape[0]
    alpha_new = math.exp(log_alpha)
    out = np.empty(2)
    weight = 1.0 / g
    for d in range(nb):
        words = doc_words[doc_ptr[d] : doc_ptr[d + 1]]
        counts = doc_counts[doc_ptr[d] : doc_ptr[d + 1]]
        nd = doc_len[d]
        k = _score_and_choose(
            words, counts, nd, uniforms[d], deterministic, log_alpha, alpha_new, beta, vbeta, g,
            discount, m, ntok, alive, uid, head, nxt, pk, pc, ictl, lp, out,
            document_tempering(nd, concentration),
        )  # fmt: skip
        log_norm[d] = out[0]
        margin[d] = out[1]
        if forced[d] >= 0:
            k = forced[d]
            margin[d] = -MARGIN_CAP
        if k < 0:
            k = open_cluster(alive, uid, fresh, free_stack, ictl)
            m[k] = 0.0
            ntok[k] = 0.0
        add_document(k, words, counts, nd, weight, m, ntok, head, nxt, pk, pc, ictl)
        assign[d] = k
    if n_sweeps > 0:
        reseat_documents(
            doc_ptr, doc_words, doc_counts, doc_len, assign, forced >= 0, uniforms[nb:],
            n_sweeps, log_alpha, beta, vbeta, deterministic, g, discount, m, ntok, alive, fresh,
            uid, head, nxt, pk, pc, free_stack, ictl, lp, np.zeros(n_sweeps, dtype=np.int64),
            concentration,
        )  # fmt: skip


@njit(cache=True)
def reseat_documents(
    doc_ptr: np.ndarray,
    doc_words: np.ndarray,
    doc_counts: np.ndarray,
    doc_len: np.ndarray,
    assign: np.ndarray,
    fixed: np.ndarray,
    uniforms: np.ndarray,
    n_sweeps: int,
    log_alpha: float,
    beta: float,
    vbeta: float,
    deterministic: bool,
    g: float,
    discount: float,
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
    moved: np.ndarray,
    concentration: float = 0.0,
) -> None:
    """Collapsed Gibbs sweeps (paper 004, Algorithm 1, with a new-cluster option) over
    documents that are already in the statistics, each in slot ``assign[d]``: every sweep
    removes each document in turn and reseats it from its complete conditional. Documents with
    ``fixed[d]`` (known labels) stay. Clusters marked ``fresh`` are freed when their last
    document leaves. ``uniforms`` holds ``len(doc_len) * n_sweeps`` draws; ``moved[s]``
    receives how many documents changed cluster in sweep ``s``; ``concentration`` as in
    :func:`seat_batch`."""
    nb = doc_len.shape[0]
    alpha_new = math.exp(log_alpha)
    out = np.empty(2)
    weight = 1.0 / g
    u_i = 0
    for sweep in range(n_sweeps):
        moved[sweep] = 0
        for d in range(nb):
            if fixed[d]:
                u_i += 1
                continue
            words = doc_words[doc_ptr[d] : doc_ptr[d + 1]]
            counts = doc_counts[doc_ptr[d] : doc_ptr[d + 1]]
            nd = doc_len[d]
            k_old = assign[d]
            add_document(k_old, words, counts, nd, -weight, m, ntok, head, nxt, pk, pc, ictl)
            _close_if_empty(
                k_old, words, m, ntok, alive, fresh, head, nxt, pk, pc, free_stack, ictl, weight
            )
            k = _score_and_choose(
                words, counts, nd, uniforms[u_i], deterministic, log_alpha, alpha_new, beta,
                vbeta, g, discount, m, ntok, alive, uid, head, nxt, pk, pc, ictl, lp, out,
                document_tempering(nd, concentration),
            )  # fmt: skip
            u_i += 1
            top = ictl[NFREE] - 1
            if k < 0 and not alive[k_old] and top >= 0 and free_stack[top] == k_old:
                ictl[NFREE] = top  # alone, and better alone: its cluster (and uid) again
                alive[k_old] = True
                fresh[k_old] = True
                k = k_old
            elif k < 0:
                k = open_cluster(alive, uid, fresh, free_stack, ictl)
                m[k] = 0.0
                ntok[k] = 0.0
            add_document(k, words, counts, nd, weight, m, ntok, head, nxt, pk, pc, ictl)
            if k != k_old:
                moved[sweep] += 1
            assign[d] = k
