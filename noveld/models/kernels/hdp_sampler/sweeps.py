"""The hdp batch sampler's entry points: seating and sweeping one batch, and re-seating one
member read-only for the novelty tracker's check."""

from __future__ import annotations

import numpy as np
from numba import njit

from noveld.models.kernels.hdp_sampler.counts import move_context, move_token
from noveld.models.kernels.hdp_sampler.steps import (
    open_tables,
    seat_document,
    table_category,
    word_table,
)
from noveld.models.kernels.hdp_scores.categories import block_scratch, choose_block_category
from noveld.models.kernels.hdp_scores.topics import CATS, Arrays, draw_topic
from noveld.models.kernels.tempering import document_tempering


def uniforms_needed(n_tokens: int, n_docs: int, n_sweeps: int) -> int:
    """Uniforms :func:`sample_batch` may draw: per pass one per document and at most five per
    token (table, a new table's category, topic, the table's category, a blocked topic)."""
    return (5 * n_tokens + n_docs) * (n_sweeps + 1)


@njit(cache=True)
def sample_batch(
    doc_ptr: np.ndarray,
    tok_word: np.ndarray,
    known: np.ndarray,
    n_sweeps: int,
    first_sweep: int,
    rng_u: np.ndarray,
    deterministic: bool,
    blocked: bool,
    beta: float,
    vbeta: float,
    zeta: float,
    alpha: float,
    gamma: float,
    tw: Arrays,
    cat: Arrays,
    ix: Arrays,
    ctl: np.ndarray,
    tok_y: np.ndarray,
    tok_t: np.ndarray,
    tabs: Arrays,
    n_tab: int,
    log_pred: np.ndarray,
    eta: float,
    cx: Arrays,
    discount: float = 0.0,
    concentration: float = 0.0,
) -> int:
    """Seat a batch (``first_sweep == 0``) and/or run Gibbs sweeps ``max(first_sweep, 1) ..
    n_sweeps`` over its variables: per word its table (eq. 3) and topic (eq. 7), then per table
    its category (eq. 6). Returns the number of tables used (−1: out of category capacity;
    rerun with more room).

    Document d's tokens are ``tok_word[doc_ptr[d]:doc_ptr[d+1]]`` (batch-local word ids, one
    entry per token); ``known[d] ≥ 0`` is its fixed category (all its words at one table).
    ``tabs = (tab_doc, tab_k, tab_size)``. Local categories must be ordered by uid, so that MAP
    ties go to the oldest. ``rng_u`` holds :func:`uniforms_needed` uniforms; pass ``s`` uses
    the ``s``-th share, so one call may stop after the seating and another continue with new
    α or γ. The seating writes each unlabelled document's log predictive to ``log_pred[d]``.
    Context (``cx = (ctx_ptr, value column, field column, U, counts[k, column], context
    table)``, prior ``eta``) enters the category choice of the table carrying it. A Pitman–Yor
    ``discount`` d puts ``m_k − d`` and ``γ + d·K`` in place of eq. 2's ``m_k`` and ``γ``;
    ``concentration`` (s > 0) tempers a table's words by their number in its category choice.
    """
    okl = cat[0]
    n_docs = doc_ptr.shape[0] - 1
    n_tok = tok_word.shape[0]
    tab_size = tabs[2]
    max_len = 1
    for d in range(n_docs):
        max_len = max(max_len, doc_ptr[d + 1] - doc_ptr[d])
    wts = np.empty(max(okl.shape[1], okl.shape[0]) + 1)
    scratch = block_scratch(max_len, okl.shape[0])
    ws = np.empty(max_len, dtype=np.int64)
    ys = np.empty(max_len, dtype=np.int64)
    idx = np.empty(max_len, dtype=np.int64)
    open_tabs = np.empty(max_len, dtype=np.int64)
    per_pass = 5 * n_tok + n_docs
    inv, inv_sum = tw[2], tw[3]
    extra = (np.empty(okl.shape[0] + 1), np.zeros(okl.shape[0] + 1))
    tab_first = np.empty(tabs[0].shape[0], dtype=np.int64)  # a table's first token
    doc_tabs = np.empty(2 * max_len, dtype=np.int64)  # the document's tables (≤ 2/token)
    by_doc_ptr = np.zeros(n_docs + 1, dtype=np.int64)
    by_doc = np.empty(0, dtype=np.int64)
    for sweep in range(first_sweep, n_sweeps + 1):
        ui = per_pass * sweep
        if sweep > 0:  # each document's open tables (a sweep adds only the current one's)
            by_doc_ptr, by_doc = _open_tables_by_document(tabs, n_tab, n_docs)
        for d in range(n_docs):
            lo, hi = doc_ptr[d], doc_ptr[d + 1]
            inv_sum[0] = inv.sum()  # exact again at every document (incremental in between)
            if sweep == 0:
                n_tab, ui = seat_document(
                    d, lo, hi, tok_word, known, zeta, beta, vbeta, gamma, tw, cat, ix, ctl,
                    tok_t, tok_y, tabs, scratch, ws, wts, rng_u, ui, deterministic, n_tab,
                    log_pred, eta, cx, extra, discount, concentration,
                )  # fmt: skip
                if n_tab < 0:
                    return -1
                continue
            ui += 1
            n_doc_tabs = 0
            if known[d] < 0:  # the document's tables and their first tokens
                for q in range(by_doc_ptr[d], by_doc_ptr[d + 1]):  # at most one per token
                    doc_tabs[n_doc_tabs] = by_doc[q]
                    n_doc_tabs += 1
                for i in range(hi - 1, lo - 1, -1):
                    tab_first[tok_t[i]] = i
            for i in range(lo, hi):
                w = tok_word[i]
                t = tok_t[i]
                move_token(w, tok_y[i], tabs[1][t], -1.0, vbeta, tw, cat, ix, ctl)
                tab_size[t] -= 1
                if known[d] < 0:
                    left = t if tab_size[t] == 0 else -1  # the token's table emptied
                    if left >= 0:
                        cat[2][tabs[1][t]] -= 1.0
                    before = n_tab
                    n_open = open_tables(d, i, t, lo, hi, tok_t, tabs, doc_tabs, n_doc_tabs,
                                         tab_first, open_tabs)  # fmt: skip
                    t, n_tab = word_table(
                        i, d, n_open, zeta, alpha, gamma, cat, ctl, tok_y, tabs,
                        open_tabs, wts, rng_u[ui], rng_u[ui + 1], deterministic, n_tab,
                        discount,
                    )  # fmt: skip
                    if t < 0:
                        return -1
                    if t == before:  # a new table of the document
                        doc_tabs[n_doc_tabs] = t
                        n_doc_tabs += 1
                        tab_first[t] = i
                    tab_first[t] = min(tab_first[t], i)
                    if left >= 0 and t != left and cx[5][d] == left:
                        # the document's context leaves the emptied table with its last token
                        move_context(d, tabs[1][left], -1.0, cx)
                        move_context(d, tabs[1][t], 1.0, cx)
                        cx[5][d] = t
                ui += 2
                y = draw_topic(w, tabs[1][t], zeta, beta, tw, cat, ix, ctl, wts, rng_u[ui],
                               deterministic)  # fmt: skip  # eq. 7
                ui += 1
                tok_t[i] = t
                tok_y[i] = y
                tab_size[t] += 1
                move_token(w, y, tabs[1][t], 1.0, vbeta, tw, cat, ix, ctl)
            if known[d] >= 0:
                continue
            for q in range(n_doc_tabs):  # in table order, as the tables were opened
                t = doc_tabs[q]
                if tab_size[t] <= 0:
                    continue
                ui = table_category(
                    t, lo, hi, tok_word, zeta, beta, vbeta, gamma, blocked, tw, cat, ix, ctl,
                    tok_t, tok_y, tabs, scratch, ws, ys, idx, wts, rng_u, ui, deterministic, d,
                    eta, cx, extra, discount, concentration,
                )  # fmt: skip
                if ui < 0:
                    return -1
    return n_tab


@njit(cache=True)
def _open_tables_by_document(
    tabs: Arrays, n_tab: int, n_docs: int
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The open tables of each document, in table order (CSR: document d's are
    ``tables[ptr[d]:ptr[d + 1]]``): a sweep then walks a document's tables, not every table
    the batch has opened so far."""
    tab_doc, tab_size = tabs[0], tabs[2]
    ptr = np.zeros(n_docs + 1, dtype=np.int64)
    for t in range(n_tab):
        if tab_size[t] > 0:
            ptr[tab_doc[t] + 1] += 1
    for d in range(n_docs):
        ptr[d + 1] += ptr[d]
    fill = ptr[:n_docs].copy()
    tables = np.empty(ptr[n_docs], dtype=np.int64)
    for t in range(n_tab):
        if tab_size[t] > 0:
            tables[fill[tab_doc[t]]] = t
            fill[tab_doc[t]] += 1
    return ptr, tables


@njit(cache=True)
def reseat_member(
    ws: np.ndarray, k: int, zeta: float, beta: float, vbeta: float, gamma: float, tw: Arrays,
    cat: Arrays, ix: Arrays, ctl: np.ndarray, discount: float = 0.0, concentration: float = 0.0,
) -> int:  # fmt: skip
    """Take a member document (batch-local word ids ``ws``, one per token) out of category
    ``k`` and return the category its first pass would choose now (MAP, no context): ``k``,
    another local category, or ``ctl[CATS]`` for a new one. Modifies the bundles.

    Its topics are not stored, so each token leaves the topic of ``k`` most likely to hold it
    (largest ``O_kl n_lw``, holding at least a whole token of both); a token ``k`` does not
    hold stays. Its table leaves ``m_k``. Then eq. 6 with the topics summed out, as in the
    first pass (:func:`choose_block_category`, its words tempered by ``concentration``)."""
    nlw = tw[0]
    okl = cat[0]
    mk = cat[2]
    nz, nzlen = ix[0], ix[1]
    n = ws.shape[0]
    for i in range(n):
        w = ws[i]
        best, best_v = -1, 0.0
        for q in range(nzlen[k]):
            y = nz[k, q]
            if okl[k, y] >= 1.0 and nlw[w, y] >= 1.0:
                v = okl[k, y] * nlw[w, y]
                if v > best_v or (v == best_v and y < best):
                    best, best_v = y, v
        if best >= 0:
            move_token(w, best, k, -1.0, vbeta, tw, cat, ix, ctl)
    mk[k] = max(mk[k] - 1.0, 0.0)
    kmax = ctl[CATS]
    m = max(n, 1)
    scratch = block_scratch(m, okl.shape[0])
    logw = np.empty(max(okl.shape[1], okl.shape[0]) + 1)
    total = np.empty(1)
    extra = np.zeros(okl.shape[0] + 1)
    return choose_block_category(ws, zeta, beta, vbeta, gamma, tw, cat, ix, ctl, kmax, scratch,
                                 logw, 0.0, True, total, extra, False, discount,
                                 document_tempering(n, concentration))  # fmt: skip
