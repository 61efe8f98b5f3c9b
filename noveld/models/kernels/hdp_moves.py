"""Group moves of the category/topic HDP's batch sampler, after the seating (the
franchise counterparts of ``dpmm``'s burst split and merge of births, docs/model.md):

- :func:`split_bursts` — a group of the batch's documents seated one by one in an older
  category leaves it for a new one when the collapsed posterior rises;
- :func:`merge_births` — two categories opened in this batch become one when that raises it.

Both compare collapsed posteriors of whole groups: the CRF prior of their tables (eq. 2) times
the groups' words with topics summed out
(:func:`~noveld.models.kernels.hdp_scores.group_log_predictive`) and their context
(Dirichlet–categorical, counted document by document). Layout of the bundles:
:mod:`noveld.models.kernels.hdp_scores`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.hdp import new_category_weight, table_weight
from noveld.models.kernels.hdp_sampler.counts import (
    document_log_likelihood,
    move_context,
    move_token,
    open_category,
)
from noveld.models.kernels.hdp_scores.blocks import group_log_predictive
from noveld.models.kernels.hdp_scores.topics import (
    Arrays,
    best_used_topic,
    draw_topic,
    list_unused,
    phi_sum,
)


@njit(cache=True)
def _words_score(
    ws: np.ndarray, ks: np.ndarray, out: np.ndarray, zeta: float, beta: float, vbeta: float,
    tw: Arrays, cat: Arrays, ix: Arrays, ctl: np.ndarray, scratch: Arrays,
) -> None:  # fmt: skip
    """``out[j] = log p(ws | category ks[j])`` (``ks[j] < 0``: a new one) for a group of words
    already taken out of the counts (:func:`group_log_predictive`)."""
    own_t, own_w, empties, psums, bus, nums = scratch
    n = ws.shape[0]
    n_empty = list_unused(ctl, tw[1], n, empties)
    for i in range(n):
        psums[i] = phi_sum(ws[i], tw, ix, beta)
        bus[i] = best_used_topic(ws[i], tw, ix, beta, n_empty)
    for j in range(ks.shape[0]):
        out[j] = group_log_predictive(
            ws, ks[j], zeta, beta, vbeta, tw, cat, ix, empties, n_empty, own_t, own_w,
            psums[:n], bus[:n], nums,
        )  # fmt: skip


@njit(cache=True)
def _context_score(docs: np.ndarray, row: int, eta: float, cx: Arrays) -> float:
    """The documents' context, one after the other, under the category in row ``row`` (an
    unused row stands for a new category): each document's likelihood given the earlier ones;
    the counts are left as they were."""
    out = 0.0
    for q in range(docs.shape[0]):
        out += document_log_likelihood(docs[q], row, eta, cx)
        move_context(docs[q], row, 1.0, cx)
    for q in range(docs.shape[0]):
        move_context(docs[q], row, -1.0, cx)
    return out


def scratch_for(n_tok: int) -> tuple[np.ndarray, ...]:
    """Work arrays for :func:`_words_score` (a group holds at most the batch's tokens)."""
    return (
        np.empty(n_tok, dtype=np.int64), np.empty(n_tok, dtype=np.int64),
        np.empty(n_tok, dtype=np.int64), np.empty(n_tok), np.empty(n_tok, dtype=np.int64),
        np.empty(n_tok),
    )  # fmt: skip


@njit(cache=True)
def split_bursts(
    doc_ptr: np.ndarray,
    tok_word: np.ndarray,
    known: np.ndarray,
    n_existing: int,
    beta: float,
    vbeta: float,
    zeta: float,
    gamma: float,
    tw: Arrays,
    cat: Arrays,
    ix: Arrays,
    ctl: np.ndarray,
    tok_y: np.ndarray,
    tok_t: np.ndarray,
    tabs: Arrays,
    n_tab: int,
    eta: float,
    cx: Arrays,
    scratch: Arrays,
    discount: float = 0.0,
) -> int:
    """Give a burst its own category (the hdp analogue of ``dpmm``'s burst split): for each
    category that existed before the batch (in uid order) and serves the single tables of two
    or more of the batch's unlabelled documents, move that group G to a new category when
    the collapsed posterior rises,

        log γ + log (|G|−1)! + log p(G | new)   >   Σ_{j<|G|} log (m_k⁻ + j) + log p(G | k⁻)

    (eq. 2 for |G| tables; ``p(G | ·)`` the group's words and context; ``k⁻`` the category
    without G). With a Pitman–Yor ``discount`` d the prior terms are
    ``log (γ + d·K) + Σ_{0<j<|G|} log (j − d)`` and ``Σ_j log (m_k⁻ + j − d)``. Seated one at a
    time, each document of a new story arriving in a burst joins the closest old category; as a
    group they explain each other. Runs right after the
    seating, when every document has one table and it carries the document's context.
    Returns how many groups moved (−1: out of category capacity)."""
    tab_doc, tab_k, tab_size = tabs
    mk = cat[2]
    n_docs = doc_ptr.shape[0] - 1
    single = np.full(n_docs, -1, dtype=np.int64)  # a document's only open table, if one
    for t in range(n_tab):
        if tab_size[t] > 0:
            d = tab_doc[t]
            single[d] = t if single[d] == -1 else -2
    ws = np.empty(tok_word.shape[0], dtype=np.int64)
    wts = np.empty(max(tw[1].shape[0], mk.shape[0]) + 1)
    group = np.empty(n_docs, dtype=np.int64)
    ks = np.empty(2, dtype=np.int64)
    scores = np.empty(2)
    moved = 0
    for k in range(n_existing):
        g = 0
        for d in range(n_docs):
            t = single[d]
            if t >= 0 and known[d] < 0 and tab_k[t] == k and cx[5][d] == t:
                group[g] = d
                g += 1
        if g < 2:
            continue
        if ctl[0] >= mk.shape[0]:
            return -1  # no room for the new category (and the scratch row): rerun with more
        n = 0  # take the group out
        for q in range(g):
            d = group[q]
            for i in range(doc_ptr[d], doc_ptr[d + 1]):
                ws[n] = tok_word[i]
                n += 1
                move_token(tok_word[i], tok_y[i], k, -1.0, vbeta, tw, cat, ix, ctl)
            move_context(d, k, -1.0, cx)
        mk[k] -= g
        ks[0], ks[1] = k, -1
        _words_score(ws[:n], ks, scores, zeta, beta, vbeta, tw, cat, ix, ctl, scratch)
        stay = scores[0] + _context_score(group[:g], k, eta, cx)
        new_w = new_category_weight(gamma, discount, mk, cat[3], ctl[0])
        split = math.log(new_w) + scores[1] + _context_score(group[:g], ctl[0], eta, cx)
        for j in range(g):
            stay += math.log(table_weight(mk[k] + j, discount))
            if j > 0:
                split += math.log(j - discount)
        kc = k
        if split > stay:
            kc = open_category(ctl, cat)
            if kc < 0:
                return -1
            moved += 1
        mk[kc] += g
        for q in range(g):  # back in: to the new category with topics drawn there, or home
            d = group[q]
            tab_k[single[d]] = kc
            for i in range(doc_ptr[d], doc_ptr[d + 1]):
                if kc != k:
                    tok_y[i] = draw_topic(tok_word[i], kc, zeta, beta, tw, cat, ix, ctl, wts,
                                          0.5, True)  # fmt: skip
                move_token(tok_word[i], tok_y[i], kc, 1.0, vbeta, tw, cat, ix, ctl)
            move_context(d, kc, 1.0, cx)
    return moved


@njit(cache=True)
def _members(
    young: np.ndarray,
    kmax: int,
    doc_ptr: np.ndarray,
    tok_t: np.ndarray,
    tabs: Arrays,
    cx: Arrays,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each young category's tokens (CSR ``tok_ptr``/``toks``) and the documents whose context
    it carries (``doc_ptr2``/``docs``)."""
    tab_k, tab_size = tabs[1], tabs[2]
    ny = young.shape[0]
    pos = np.full(kmax, -1, dtype=np.int64)
    for j in range(ny):
        pos[young[j]] = j
    n_docs = doc_ptr.shape[0] - 1
    tcount = np.zeros(ny + 1, dtype=np.int64)
    dcount = np.zeros(ny + 1, dtype=np.int64)
    for i in range(tok_t.shape[0]):
        t = tok_t[i]
        if tab_size[t] > 0 and pos[tab_k[t]] >= 0:
            tcount[pos[tab_k[t]] + 1] += 1
    for d in range(n_docs):
        t = cx[5][d]
        if tab_size[t] > 0 and pos[tab_k[t]] >= 0:
            dcount[pos[tab_k[t]] + 1] += 1
    tok_ptr = np.cumsum(tcount)
    doc_ptr2 = np.cumsum(dcount)
    toks = np.empty(tok_ptr[ny], dtype=np.int64)
    docs = np.empty(doc_ptr2[ny], dtype=np.int64)
    fill = tok_ptr[:ny].copy()
    for i in range(tok_t.shape[0]):
        t = tok_t[i]
        if tab_size[t] > 0 and pos[tab_k[t]] >= 0:
            toks[fill[pos[tab_k[t]]]] = i
            fill[pos[tab_k[t]]] += 1
    fill = doc_ptr2[:ny].copy()
    for d in range(n_docs):
        t = cx[5][d]
        if tab_size[t] > 0 and pos[tab_k[t]] >= 0:
            docs[fill[pos[tab_k[t]]]] = d
            fill[pos[tab_k[t]]] += 1
    return tok_ptr, toks, doc_ptr2, docs


@njit(cache=True)
def _shares_a_word(
    a: np.ndarray, b: np.ndarray, tok_word: np.ndarray, mark: np.ndarray
) -> bool:  # fmt: skip
    """Whether token sets ``a`` and ``b`` share a word (``mark``: zeros, one per word; left
    zero)."""
    for i in a:
        mark[tok_word[i]] = True
    out = False
    for j in b:
        if mark[tok_word[j]]:
            out = True
            break
    for i in a:
        mark[tok_word[i]] = False
    return out


@njit(cache=True)
def _take(
    toks: np.ndarray, docs: np.ndarray, k: int, s: float, tok_word: np.ndarray,
    tok_y: np.ndarray, vbeta: float, tw: Arrays, cat: Arrays, ix: Arrays, ctl: np.ndarray,
    cx: Arrays,
) -> None:  # fmt: skip
    """Remove (s = −1) or restore (s = 1) a category's tokens and context counts."""
    for i in toks:
        move_token(tok_word[i], tok_y[i], k, s, vbeta, tw, cat, ix, ctl)
    for d in docs:
        move_context(d, k, s, cx)


@njit(cache=True)
def merge_births(
    doc_ptr: np.ndarray,
    tok_word: np.ndarray,
    n_existing: int,
    beta: float,
    vbeta: float,
    zeta: float,
    gamma: float,
    tw: Arrays,
    cat: Arrays,
    ix: Arrays,
    ctl: np.ndarray,
    tok_y: np.ndarray,
    tok_t: np.ndarray,
    tabs: Arrays,
    eta: float,
    cx: Arrays,
    scratch: Arrays,
    discount: float = 0.0,
) -> int:
    """Merge categories opened in this batch (the hdp analogue of ``dpmm``'s merge of births):
    for each pair sharing a word, the collapsed posterior ratio of one category against two,

        log p(A ∪ B | new) − log p(A | new) − log p(B | new)
            + log Γ(m_A + m_B) − log Γ(m_A) − log Γ(m_B) − log γ

    (eq. 2 for their tables; ``p(· | new)`` the words with topics summed out and the context;
    under a Pitman–Yor ``discount`` d the prior part is ``log Γ(m_A + m_B − d) + log Γ(1 − d)
    − log Γ(m_A − d) − log Γ(m_B − d) − log (γ + d(K−1))``, K counting both);
    greedily, best gain first, each category in one merge at most; the one with more tables
    (ties: the older) survives and tokens keep their topics. Documents of one new story seated
    apart before either category had weight otherwise stay in two. Returns the merges (−1: no
    scratch row for a new category's context; rerun with more room)."""
    tab_k = tabs[1]
    mk, alive = cat[2], cat[3]
    kmax = ctl[0]
    n_young = 0
    young = np.empty(max(kmax - n_existing, 0), dtype=np.int64)
    for c in range(n_existing, kmax):
        if alive[c] and mk[c] > 0.0:
            young[n_young] = c
            n_young += 1
    if n_young < 2:
        return 0
    if kmax >= mk.shape[0]:
        return -1
    young = young[:n_young]
    tok_ptr, toks, dptr, docs = _members(young, kmax, doc_ptr, tok_t, tabs, cx)
    ws = np.empty(tok_word.shape[0], dtype=np.int64)
    ks = np.full(1, -1, dtype=np.int64)
    one = np.empty(1)
    gains = np.full((n_young, n_young), -np.inf)
    mark = np.zeros(tw[0].shape[0], dtype=np.bool_)
    log_k_minus_one = math.log(new_category_weight(gamma, discount, mk, alive, kmax) - discount)
    for a in range(n_young):
        ta, da = toks[tok_ptr[a] : tok_ptr[a + 1]], docs[dptr[a] : dptr[a + 1]]
        for b in range(a + 1, n_young):
            tb, db = toks[tok_ptr[b] : tok_ptr[b + 1]], docs[dptr[b] : dptr[b + 1]]
            if not _shares_a_word(ta, tb, tok_word, mark):
                continue
            ka, kb = young[a], young[b]
            _take(ta, da, ka, -1.0, tok_word, tok_y, vbeta, tw, cat, ix, ctl, cx)
            _take(tb, db, kb, -1.0, tok_word, tok_y, vbeta, tw, cat, ix, ctl, cx)
            gain = (
                math.lgamma(table_weight(mk[ka] + mk[kb], discount))
                + math.lgamma(1.0 - discount)
                - math.lgamma(table_weight(mk[ka], discount))
                - math.lgamma(table_weight(mk[kb], discount))
                - log_k_minus_one
            )  # fmt: skip
            for part, sign in ((0, -1.0), (1, -1.0), (2, 1.0)):
                n = 0
                if part != 1:
                    for i in ta:
                        ws[n] = tok_word[i]
                        n += 1
                if part != 0:
                    for i in tb:
                        ws[n] = tok_word[i]
                        n += 1
                _words_score(ws[:n], ks, one, zeta, beta, vbeta, tw, cat, ix, ctl, scratch)
                gain += sign * one[0]
            gain += _context_score(np.concatenate((da, db)), kmax, eta, cx)
            gain -= _context_score(da, kmax, eta, cx) + _context_score(db, kmax, eta, cx)
            _take(ta, da, ka, 1.0, tok_word, tok_y, vbeta, tw, cat, ix, ctl, cx)
            _take(tb, db, kb, 1.0, tok_word, tok_y, vbeta, tw, cat, ix, ctl, cx)
            gains[a, b] = gain
    used = np.zeros(n_young, dtype=np.bool_)
    merged = 0
    while True:
        best, ba, bb = 0.0, -1, -1
        for a in range(n_young):
            for b in range(a + 1, n_young):
                if not used[a] and not used[b] and gains[a, b] > best:
                    best, ba, bb = gains[a, b], a, b
        if ba < 0:
            return merged
        src, dst = (ba, bb) if mk[young[ba]] < mk[young[bb]] else (bb, ba)
        ks_, kd = young[src], young[dst]
        ts, ds = toks[tok_ptr[src] : tok_ptr[src + 1]], docs[dptr[src] : dptr[src + 1]]
        _take(ts, ds, ks_, -1.0, tok_word, tok_y, vbeta, tw, cat, ix, ctl, cx)
        _take(ts, ds, kd, 1.0, tok_word, tok_y, vbeta, tw, cat, ix, ctl, cx)
        for i in ts:
            tab_k[tok_t[i]] = kd
        mk[kd] += mk[ks_]
        mk[ks_] = 0.0
        used[src] = used[dst] = True
        merged += 1
