"""Split moves: the posterior gain of splitting a group of batch documents out of their cluster,
the greedy choice of that group, and the reseating of the burst's stragglers after a split.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from noveld.models.kernels.multinomial.pool import KMAX, add_document
from noveld.models.kernels.multinomial.predictive import choose, score_document
from noveld.models.kernels.tempering import document_tempering


@njit(cache=True)
def split_gain(
    k: int,
    docs: np.ndarray,
    ptr: np.ndarray,
    words: np.ndarray,
    counts: np.ndarray,
    lengths: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    scale: float,
    beta: float,
    vbeta: float,
    log_new: float,
    discount: float,
) -> float:
    """Log posterior ratio of splitting the batch documents ``docs`` out of cluster ``k`` (where
    they are counted) into a cluster of their own: the negated :func:`merge_gains` of the group
    G and the rest R = k − G::

        gain = lgΓ(Vβ) + lgΓ(Vβ+n_R+n_G) − lgΓ(Vβ+n_R) − lgΓ(Vβ+n_G)
               − Σ_{w∈G} [lgΓ(β+r_w+g_w) − lgΓ(β+r_w) − lgΓ(β+g_w) + lgΓ(β)]
               − lgΓ(m_R+m_G−d) − lgΓ(1−d) + lgΓ(m_R−d) + lgΓ(m_G−d) + log(θ + K d)

    (the Dirichlet–multinomial marginal, paper 004 eq. A.8, Pitman–Yor partition prior; ``log_new``
    is ``log(θ + K d)`` with K the live clusters before the split). −inf when R would be empty.
    """
    n_g_tok = 0
    n_entries = 0
    for i in range(docs.shape[0]):
        d = docs[i]
        n_g_tok += lengths[d]
        n_entries += ptr[d + 1] - ptr[d]
    gw = np.empty(n_entries, dtype=np.int64)
    gc = np.empty(n_entries)
    j = 0
    for i in range(docs.shape[0]):
        d = docs[i]
        for e in range(ptr[d], ptr[d + 1]):
            gw[j] = words[e]
            gc[j] = counts[e]
            j += 1
    order = np.argsort(gw, kind="mergesort")
    m_g = float(docs.shape[0])
    m_all = m[k] * scale
    n_all = ntok[k] * scale
    m_r = m_all - m_g
    n_r = n_all - n_g_tok
    if m_r < 0.5 or m_r - discount <= 0.0:
        return -np.inf
    lgb = math.lgamma(beta)
    lik = (
        math.lgamma(vbeta)
        + math.lgamma(vbeta + n_all)
        - math.lgamma(vbeta + max(n_r, 0.0))
        - math.lgamma(vbeta + n_g_tok)
    )
    nv = head.shape[0]
    i = 0
    while i < n_entries:
        w = gw[order[i]]
        g = 0.0
        while i < n_entries and gw[order[i]] == w:
            g += gc[order[i]]
            i += 1
        total = 0.0
        if w < nv:
            e = head[w]
            while e >= 0:
                if pk[e] == k:
                    total = pc[e] * scale
                    break
                e = nxt[e]
        r = max(total - g, 0.0)
        lik -= math.lgamma(beta + r + g) - math.lgamma(beta + r) - math.lgamma(beta + g) + lgb
    prior = (
        -math.lgamma(m_all - discount)
        - math.lgamma(1.0 - discount)
        + math.lgamma(m_r - discount)
        + math.lgamma(m_g - discount)
        + log_new
    )
    return lik + prior


@njit(cache=True)
def _split_word_term(beta: float, lgb: float, total: float, g: float) -> float:
    """A word's term of :func:`split_gain`: −[lgΓ(β+t) − lgΓ(β+t−g) − lgΓ(β+g) + lgΓ(β)]."""
    if g <= 0.0:
        return 0.0
    r = max(total - g, 0.0)
    return -(math.lgamma(beta + r + g) - math.lgamma(beta + r) - math.lgamma(beta + g) + lgb)


@njit(cache=True)
def _split_rest_terms(
    m_all: float,
    n_all: float,
    m_g: float,
    n_g: float,
    vbeta: float,
    log_new: float,
    discount: float,
) -> float:
    """The token-total and partition-prior terms of :func:`split_gain` (−inf: nothing left)."""
    m_r = m_all - m_g
    n_r = max(n_all - n_g, 0.0)
    if m_r < 0.5 or m_r - discount <= 0.0:
        return -np.inf
    return (
        math.lgamma(vbeta)
        + math.lgamma(vbeta + n_all)
        - math.lgamma(vbeta + n_r)
        - math.lgamma(vbeta + n_g)
        - math.lgamma(m_all - discount)
        - math.lgamma(1.0 - discount)
        + math.lgamma(m_r - discount)
        + math.lgamma(m_g - discount)
        + log_new
    )


@njit(cache=True)
def best_split_group(
    k: int,
    docs: np.ndarray,
    ptr: np.ndarray,
    words: np.ndarray,
    counts: np.ndarray,
    lengths: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    scale: float,
    beta: float,
    vbeta: float,
    log_new: float,
    discount: float,
    keep: np.ndarray,
) -> float:
    """Greedy backward selection of the subgroup of ``docs`` to split out of cluster ``k``.

    Starts from the whole group; while its :func:`split_gain` is not positive and more than two
    documents remain, drops the document whose removal gives the highest gain (a mixed group —
    a new story's documents plus a few of the old story's — splits once the old ones are left
    behind). ``keep[i]`` says whether ``docs[i]`` is in the returned group; returns its gain.
    Each candidate removal is scored incrementally (only its own words' terms change), so a
    round costs O(group entries), not O(group size × group entries).
    """
    n = docs.shape[0]
    n_entries = 0
    for i in range(n):
        n_entries += ptr[docs[i] + 1] - ptr[docs[i]]
    ew = np.empty(n_entries, dtype=np.int64)
    for i in range(n):
        d = docs[i]
        for e in range(ptr[d], ptr[d + 1]):
            n_entries -= 1
            ew[n_entries] = words[e]
    uniq = np.unique(ew)
    n_u = uniq.shape[0]
    # each batch entry's index in ``uniq``, looked up once: the greedy rounds below revisit
    # every entry of the group once per round
    eoff = np.empty(n + 1, dtype=np.int64)
    eoff[0] = 0
    for i in range(n):
        eoff[i + 1] = eoff[i] + ptr[docs[i] + 1] - ptr[docs[i]]
    ui = np.empty(eoff[n], dtype=np.int64)
    for i in range(n):
        d = docs[i]
        for e in range(ptr[d], ptr[d + 1]):
            ui[eoff[i] + e - ptr[d]] = np.searchsorted(uniq, words[e])
    total = np.zeros(n_u)
    nv = head.shape[0]
    for u in range(n_u):
        w = uniq[u]
        if w < nv:
            e = head[w]
            while e >= 0:
                if pk[e] == k:
                    total[u] = pc[e] * scale
                    break
                e = nxt[e]
    g = np.zeros(n_u)
    m_g = 0.0
    n_g = 0.0
    for i in range(n):
        keep[i] = True
        d = docs[i]
        m_g += 1.0
        n_g += lengths[d]
        for e in range(ptr[d], ptr[d + 1]):
            g[ui[eoff[i] + e - ptr[d]]] += counts[e]
    lgb = math.lgamma(beta)
    term = np.empty(n_u)
    # less_one[u]: the change of word u's term when one occurrence leaves the group, the
    # common case of a candidate removal; kept current as g changes, so the rounds below
    # call lgamma only for repeated words (the same function of the same values: exact)
    less_one = np.empty(n_u)
    acc = 0.0
    for u in range(n_u):
        term[u] = _split_word_term(beta, lgb, total[u], g[u])
        less_one[u] = _split_word_term(beta, lgb, total[u], g[u] - 1.0) - term[u]
        acc += term[u]
    m_all = m[k] * scale
    n_all = ntok[k] * scale
    best = acc + _split_rest_terms(m_all, n_all, m_g, n_g, vbeta, log_new, discount)
    size = n
    while not best > 0.0 and size > 2:
        drop, drop_gain = -1, -np.inf
        for i in range(n):
            if not keep[i]:
                continue
            d = docs[i]
            s = acc
            for e in range(ptr[d], ptr[d + 1]):
                u = ui[eoff[i] + e - ptr[d]]
                if counts[e] == 1.0:
                    s += less_one[u]
                else:
                    s += _split_word_term(beta, lgb, total[u], g[u] - counts[e]) - term[u]
            gain = s + _split_rest_terms(
                m_all, n_all, m_g - 1.0, n_g - lengths[d], vbeta, log_new, discount
            )
            if gain > drop_gain:
                drop, drop_gain = i, gain
        keep[drop] = False
        size -= 1
        d = docs[drop]
        m_g -= 1.0
        n_g -= lengths[d]
        for e in range(ptr[d], ptr[d + 1]):
            u = ui[eoff[drop] + e - ptr[d]]
            g[u] -= counts[e]
            acc -= term[u]
            term[u] = _split_word_term(beta, lgb, total[u], g[u])
            less_one[u] = _split_word_term(beta, lgb, total[u], g[u] - 1.0) - term[u]
            acc += term[u]
        best = drop_gain
    return best


@njit(cache=True)
def best_split_groups(
    slots: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    docs: np.ndarray,
    ptr: np.ndarray,
    words: np.ndarray,
    counts: np.ndarray,
    lengths: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    scale: float,
    beta: float,
    vbeta: float,
    theta: float,
    discount: float,
    n_live: int,
    keep: np.ndarray,
) -> np.ndarray:
    """:func:`best_split_group` for each candidate cluster ``slots[i]`` in turn, whose batch
    documents are ``docs[starts[i]:ends[i]]`` (their group lands in the same slice of ``keep``).

    A positive gain means the caller will open a new cluster, so later candidates see one more
    live cluster in the partition prior, exactly as when each move is made before the next
    candidate is scored: a move touches only its own cluster and the new one, never another
    candidate's statistics. One call per split round instead of one per candidate.
    """
    gains = np.empty(slots.shape[0])
    for i in range(slots.shape[0]):
        a, b = starts[i], ends[i]
        gains[i] = best_split_group(
            slots[i], docs[a:b], ptr, words, counts, lengths, m, ntok, head, nxt, pk, pc,
            scale, beta, vbeta, math.log(theta + discount * n_live), discount, keep[a:b],
        )  # fmt: skip
        if gains[i] > 0.0:
            n_live += 1
    return gains


@njit(cache=True)
def reseat_into_fresh(
    ptr: np.ndarray,
    words: np.ndarray,
    counts: np.ndarray,
    lengths: np.ndarray,
    assign: np.ndarray,
    forced: np.ndarray,
    pinned: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    fresh: np.ndarray,
    uid: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    ictl: np.ndarray,
    scale: float,
    beta: float,
    vbeta: float,
    log_alpha_new: float,
    discount: float,
    concentration: float = 0.0,
) -> None:
    """One MAP Gibbs step for each batch document in an older cluster (not ``fresh``, not
    ``pinned``, not ``forced``), in order, taken only when it lands in a ``fresh`` cluster:
    the documents of a burst that had joined other old clusters follow the split-off group.
    Opens and frees nothing, so ``kmax`` is fixed; ``assign`` is updated in place.
    ``concentration`` tempers the words by length, as the seating does."""
    kmax = ictl[KMAX]
    lp = np.empty(max(kmax, 1))
    out = np.empty(2)
    weight = 1.0 / scale
    for d in range(assign.shape[0]):
        cur = assign[d]
        if fresh[cur] or forced[d] >= 0 or pinned[cur]:
            continue
        w = words[ptr[d] : ptr[d + 1]]
        c = counts[ptr[d] : ptr[d + 1]]
        nd = lengths[d]
        add_document(cur, w, c, nd, -weight, m, ntok, head, nxt, pk, pc, ictl)
        lp_new = score_document(
            w, c, nd, lp, m, ntok, alive, head, nxt, pk, pc, kmax, scale, beta, vbeta,
            log_alpha_new, discount, document_tempering(nd, concentration),
        )  # fmt: skip
        k = choose(lp, kmax, lp_new, 0.0, True, out, uid)
        dst = k if k >= 0 and fresh[k] else cur
        add_document(dst, w, c, nd, weight, m, ntok, head, nxt, pk, pc, ictl)
        assign[d] = dst
