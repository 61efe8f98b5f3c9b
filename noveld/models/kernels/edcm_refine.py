"""numba kernel of the offline EDCM refinement (``noveld fit --likelihood edcm``).

One site per document, as in paper 002's EP (Section 3.3): each document in turn is taken out
of its cluster — the cavity of eq. 6, here the cluster's statistics less the document's, with
the shape re-solved — and scored against every cluster under the EDCM of eq. 2 and the CRP
weights, the tilted distribution of eq. 7 with β at its cavity mode; the site is then projected
back onto one cluster (the argmax, or a draw). See :mod:`noveld.models.refine_edcm`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.edcm import score_document, score_document_linear
from noveld.models.kernels.edcm_shapes import S, reshape
from noveld.models.kernels.multinomial import (
    KMAX,
    LINEAR_MAX_LEN,
    NFREE,
    _close_if_empty,
    add_document,
    choose,
    choose_linear,
    open_cluster,
)


@njit(cache=True)
def reseat_edcm(
    doc_ptr: np.ndarray,
    doc_words: np.ndarray,
    doc_ones: np.ndarray,
    doc_entries: np.ndarray,
    doc_tokens: np.ndarray,
    doc_bin: np.ndarray,
    assign: np.ndarray,
    fixed: np.ndarray,
    uniforms: np.ndarray,
    n_sweeps: int,
    log_alpha: float,
    c: float,
    doc_cb: np.ndarray,
    sb: float,
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
    hist: np.ndarray,
    lengths: np.ndarray,
    shape: np.ndarray,
    lp: np.ndarray,
    moved: np.ndarray,
) -> None:
    """``n_sweeps`` sweeps over documents already in the statistics (EDCM view, as
    :func:`~noveld.models.kernels.edcm.seat_batch` takes them), each in slot ``assign[d]``:
    every document is removed, its old cluster's shape re-solved, and it is reseated from the
    EDCM seating weights (MAP when ``deterministic``, else drawn with ``uniforms``, one per
    document per sweep). ``fixed`` documents stay. A ``fresh`` cluster its last document leaves
    is freed; a document alone and better alone keeps its slot (and uid). ``hist`` and ``shape``
    (rows for every slot of the capacity) are kept current; ``moved[s]`` counts the documents
    that changed cluster in sweep ``s``."""
    nb = doc_tokens.shape[0]
    out = np.empty(2)
    weight = 1.0 / g
    alpha_new = math.exp(log_alpha)
    u_i = 0
    for sweep in range(n_sweeps):
        moved[sweep] = 0
        for d in range(nb):
            if fixed[d]:
                u_i += 1
                continue
            lo, hi = doc_ptr[d], doc_ptr[d + 1]
            entries = doc_words[lo:hi]
            ones = doc_ones[lo:hi]
            words = entries[:-1]
            cb = doc_cb[lo : hi - 1]
            n = doc_tokens[d]
            b = doc_bin[d]
            k_old = assign[d]
            add_document(
                k_old, entries, ones, doc_entries[d], -weight, m, ntok, head, nxt, pk, pc, ictl
            )
            hist[k_old, b] -= weight
            _close_if_empty(
                k_old, entries, m, ntok, alive, fresh, head, nxt, pk, pc, free_stack, ictl, weight
            )
            if alive[k_old]:
                reshape(k_old, hist, lengths, m, ntok, g, c, sb, discount, shape)
            kmax = ictl[KMAX]
            if n <= LINEAR_MAX_LEN:
                w_new = score_document_linear(
                    words, n, lp, alive, shape, head, nxt, pk, pc, kmax, g, c, cb, sb, alpha_new,
                    discount,
                )  # fmt: skip
                k = choose_linear(lp, kmax, w_new, uniforms[u_i], deterministic, out, uid)
            else:
                lp_new = score_document(
                    words, n, lp, alive, shape, head, nxt, pk, pc, kmax, g, c, cb, sb, log_alpha,
                    discount,
                )  # fmt: skip
                k = choose(lp, kmax, lp_new, uniforms[u_i], deterministic, out, uid)
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
            if m[k] == 0.0:  # an empty slot (opened, or its own again): the prior's shape
                hist[k, :] = 0.0
                shape[k, S] = 0.0
            add_document(k, entries, ones, doc_entries[d], weight, m, ntok, head, nxt, pk, pc, ictl)
            hist[k, b] += weight
            reshape(k, hist, lengths, m, ntok, g, c, sb, discount, shape)
            if k != k_old:
                moved[sweep] += 1
            assign[d] = k
