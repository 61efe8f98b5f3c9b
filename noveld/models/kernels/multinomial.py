"""numba kernels for CRP seating under the collapsed Dirichlet–multinomial likelihood.

The cluster–word statistics live in a *postings pool*: for every word ``w`` a singly linked list
(``head[w]`` → ``nxt[e]`` …) of entries ``(pk[e] = cluster slot, pc[e] = raw count)``. Scoring a
document therefore walks only the postings of its own words (DESIGN §5.1): the part of the
predictive that depends on ``n_k`` alone is computed for every cluster in O(K) and the word part
is corrected for the clusters that share a word with the document.

All statistics are stored *raw*; the true value is ``raw * g`` where ``g`` is a global decay scale
(lazy exponential forgetting). A document added while the scale is ``g`` is added with raw weight
``1 / g`` so that its true weight is 1.

Integer control block ``ictl``: ``[pool_used, kmax, nfree, next_uid, docs_seen]``.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

POOL_USED = 0
KMAX = 1
NFREE = 2
NEXT_UID = 3
DOCS_SEEN = 4
STEPS = 5  # batches applied (the SVI step counter t)
ICTL_SIZE = 6

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
) -> float:
    """Fill ``lp[:kmax]`` with unnormalised log seating weights; return the new-cluster weight.

    Implements the CRP × collapsed Dirichlet–multinomial predictive (paper 004 eq. 4, with the
    DP prior ``m_k`` / ``α`` in place of the finite ``α_j + n_j − 1``)::

        log p(z=k) = log m_k − log Γ(n_k+Vβ+N_d)/Γ(n_k+Vβ)
                     + Σ_w [log Γ(n_kw+β+N_dw)/Γ(n_kw+β) − log Γ(β+N_dw)/Γ(β)]
        log p(z=new) = log α − log Γ(Vβ+N_d)/Γ(Vβ)

    The per-word term is written relative to the empty cluster, so it is zero for every cluster
    that does not contain the word and only postings need visiting. Dead slots get ``-inf``.
    """
    n_alive = 0
    for k in range(kmax):
        if alive[k]:
            n_alive += 1
            lp[k] = math.log(max(m[k] * g - discount, 1e-3)) - log_rising(ntok[k] * g + vbeta, nd)
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
    a_new = math.exp(log_alpha_new) + discount * n_alive
    return math.log(a_new) - log_rising(vbeta, nd)


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
def find_or_alloc(
    w: int,
    k: int,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    ictl: np.ndarray,
) -> int:
    """Index of the postings entry (w, k), allocating a zero entry at the head if absent."""
    e = head[w]
    while e >= 0:
        if pk[e] == k:
            return e
        e = nxt[e]
    return alloc_entry(w, k, head, nxt, pk, pc, ictl)


@njit(cache=True)
def alloc_entry(
    w: int,
    k: int,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    ictl: np.ndarray,
) -> int:
    """A new zero postings entry (w, k) at the head of w's list (the pool must have room)."""
    e = ictl[POOL_USED]
    ictl[POOL_USED] = e + 1
    pk[e] = k
    pc[e] = 0.0
    nxt[e] = head[w]
    head[w] = e
    return e


@njit(cache=True)
def add_document(
    k: int,
    words: np.ndarray,
    counts: np.ndarray,
    nd: int,
    weight: float,
    m: np.ndarray,
    ntok: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    ictl: np.ndarray,
) -> None:
    """Add a document's counts with raw ``weight`` to cluster slot ``k`` (negative removes)."""
    m[k] += weight
    ntok[k] += nd * weight
    for j in range(words.shape[0]):
        e = find_or_alloc(words[j], k, head, nxt, pk, pc, ictl)
        pc[e] += counts[j] * weight


@njit(cache=True)
def open_cluster(
    alive: np.ndarray, uid: np.ndarray, fresh: np.ndarray, free_stack: np.ndarray, ictl: np.ndarray
) -> int:
    """Take a free slot (reusing freed ones first) for a new cluster with a fresh uid."""
    if ictl[NFREE] > 0:
        ictl[NFREE] -= 1
        k = free_stack[ictl[NFREE]]
    else:
        k = ictl[KMAX]
        ictl[KMAX] = k + 1
    alive[k] = True
    fresh[k] = True
    uid[k] = ictl[NEXT_UID]
    ictl[NEXT_UID] += 1
    return k


@njit(cache=True)
def _close_if_empty(
    k: int,
    words: np.ndarray,
    m: np.ndarray,
    ntok: np.ndarray,
    alive: np.ndarray,
    fresh: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    free_stack: np.ndarray,
    ictl: np.ndarray,
    weight: float,
) -> None:
    """Free a cluster born in this batch once its last document has left it.

    The entries of the words just removed hold the only non-zero counts left (up to rounding),
    so they are reset to exactly zero and the slot can be reused at once.
    """
    if fresh[k] and m[k] < 0.5 * weight:
        m[k] = 0.0
        ntok[k] = 0.0
        for j in range(words.shape[0]):
            e = find_or_alloc(words[j], k, head, nxt, pk, pc, ictl)
            pc[e] = 0.0
        alive[k] = False
        fresh[k] = False
        free_stack[ictl[NFREE]] = k
        ictl[NFREE] += 1


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
) -> int:
    """Score one document against every cluster and a new one, then choose (slot, or −1 for a
    new cluster): the linear-domain path for short documents, the log domain otherwise."""
    kmax = ictl[KMAX]
    if nd <= LINEAR_MAX_LEN:
        w_new = score_document_linear(
            words, counts, nd, lp, m, ntok, alive, head, nxt, pk, pc, kmax, g, beta, vbeta,
            alpha_new, discount,
        )  # fmt: skip
        return choose_linear(lp, kmax, w_new, u, deterministic, out, uid)
    lp_new = score_document(
        words, counts, nd, lp, m, ntok, alive, head, nxt, pk, pc, kmax, g, beta, vbeta,
        log_alpha, discount,
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
) -> None:
    """Sequentially seat a batch by CRP, then run ``n_sweeps`` collapsed Gibbs sweeps over it.

    The first pass is the one-pass CRP seating of DESIGN §5.1; each sweep removes every batch
    document from its cluster and reseats it from the complete conditional (paper 004, Algorithm
    1, restricted to the current batch, with a new-cluster option: :func:`reseat_documents`).
    ``assign`` receives slots.
    ``uniforms`` must hold ``len(doc_len) * (1 + n_sweeps)`` draws. From the first pass,
    ``log_norm[d]`` gets the log normaliser of the seating weights (for the log predictive) and
    ``margin[d]`` the new-cluster margin ``lp_new − max_k lp_k`` (the novelty score).
    A document with ``forced[d] ≥ 0`` (a known label's cluster slot) is seated there and never
    moved; its weights are still computed for ``log_norm``.
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
) -> None:
    """Collapsed Gibbs sweeps (paper 004, Algorithm 1, with a new-cluster option) over
    documents that are already in the statistics, each in slot ``assign[d]``: every sweep
    removes each document in turn and reseats it from its complete conditional. Documents with
    ``fixed[d]`` (known labels) stay. Clusters marked ``fresh`` are freed when their last
    document leaves. ``uniforms`` holds ``len(doc_len) * n_sweeps`` draws; ``moved[s]``
    receives how many documents changed cluster in sweep ``s``."""
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


@njit(cache=True)
def compact_postings(
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    alive: np.ndarray,
    ntok: np.ndarray,
    ictl: np.ndarray,
    min_raw: float,
    uncounted: np.ndarray,
) -> None:
    """Rebuild the pool without entries of dead clusters or with raw count ≤ ``min_raw``.

    Pruned counts of live clusters are taken off their token mass ``ntok`` so ``n_k = Σ_w n_kw``
    still holds — except for words flagged in ``uncounted`` (one flag per word id): entries a
    model keeps beside its tokens (hdp context, vmf dimensions), never part of ``ntok``. Entries
    keep their per-word order; with ``min_raw = 0`` scoring after compaction is bit-identical.
    """
    n_old = ictl[POOL_USED]
    new_pk = np.empty(n_old, dtype=pk.dtype)
    new_pc = np.empty(n_old, dtype=pc.dtype)
    new_nxt = np.empty(n_old, dtype=nxt.dtype)
    out = 0
    for w in range(head.shape[0]):
        e = head[w]
        first = -1
        prev = -1
        while e >= 0:
            k = pk[e]
            if alive[k] and 0.0 < pc[e] <= min_raw and not uncounted[w]:
                ntok[k] -= pc[e]
            if alive[k] and pc[e] > min_raw:
                new_pk[out] = k
                new_pc[out] = pc[e]
                new_nxt[out] = -1
                if prev >= 0:
                    new_nxt[prev] = out
                else:
                    first = out
                prev = out
                out += 1
            e = nxt[e]
        head[w] = first
    pk[:out] = new_pk[:out]
    pc[:out] = new_pc[:out]
    nxt[:out] = new_nxt[:out]
    ictl[POOL_USED] = out


@njit(cache=True)
def cluster_word_counts(
    k: int,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(word ids, raw counts) of cluster slot ``k`` — O(pool); for summaries, not hot paths."""
    n = 0
    for w in range(head.shape[0]):
        e = head[w]
        while e >= 0:
            if pk[e] == k and pc[e] > 0.0:
                n += 1
            e = nxt[e]
    ws = np.empty(n, dtype=np.int64)
    cs = np.empty(n, dtype=np.float64)
    i = 0
    for w in range(head.shape[0]):
        e = head[w]
        while e >= 0:
            if pk[e] == k and pc[e] > 0.0:
                ws[i] = w
                cs[i] = pc[e]
                i += 1
            e = nxt[e]
    return ws, cs


@njit(cache=True)
def word_baseline(counts: np.ndarray, beta: float) -> float:
    """``Σ log Γ(β+c)/Γ(β)`` over (document, word) counts: the empty-cluster word term of
    paper 004 eq. 4, which the seating scores leave out (a count of 1 contributes log β)."""
    s = 0.0
    for c in counts:
        if c >= 1:
            s += log_rising(beta, c)
    return s


@njit(cache=True)
def add_word_counts(
    slots: np.ndarray,
    words: np.ndarray,
    raw_counts: np.ndarray,
    head: np.ndarray,
    nxt: np.ndarray,
    pk: np.ndarray,
    pc: np.ndarray,
    ictl: np.ndarray,
) -> None:
    """Add raw counts to the (word, slot) postings entries, allocating missing ones.

    The replay half of a :class:`StatsDelta`: the pool must have room for ``words.shape[0]``
    new entries (``MultinomialStats.reserve``). Entries are taken word by word: a word's
    postings list is walked once for all of its entries (a common word, or a vmf dimension that
    every cluster holds, would otherwise cost a walk per entry). Each entry's additions happen
    in input order, so the counts are those of adding one entry at a time.
    """
    n = words.shape[0]
    if n == 0:
        return
    order = np.argsort(words, kind="mergesort")
    kmax = 0
    for j in range(n):
        kmax = max(kmax, slots[j] + 1)
    entry_of = np.full(kmax, -1, dtype=np.int64)
    wanted = np.zeros(kmax, dtype=np.bool_)
    start = 0
    while start < n:
        w = words[order[start]]
        stop = start
        distinct = 0
        while stop < n and words[order[stop]] == w:
            k = slots[order[stop]]
            if not wanted[k]:
                wanted[k] = True
                distinct += 1
            stop += 1
        found = 0
        e = head[w]
        while e >= 0 and found < distinct:
            k = pk[e]
            if k < kmax and wanted[k] and entry_of[k] < 0:
                entry_of[k] = e
                found += 1
            e = nxt[e]
        for i in range(start, stop):
            j = order[i]
            k = slots[j]
            e = entry_of[k]
            if e < 0:
                e = alloc_entry(w, k, head, nxt, pk, pc, ictl)
                entry_of[k] = e
            pc[e] += raw_counts[j]
        for i in range(start, stop):
            k = slots[order[i]]
            wanted[k] = False
            entry_of[k] = -1
        start = stop


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
) -> None:
    """One MAP Gibbs step for each batch document in an older cluster (not ``fresh``, not
    ``pinned``, not ``forced``), in order, taken only when it lands in a ``fresh`` cluster:
    the documents of a burst that had joined other old clusters follow the split-off group.
    Opens and frees nothing, so ``kmax`` is fixed; ``assign`` is updated in place."""
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
            log_alpha_new, discount,
        )  # fmt: skip
        k = choose(lp, kmax, lp_new, 0.0, True, out, uid)
        dst = k if k >= 0 and fresh[k] else cur
        add_document(dst, w, c, nd, weight, m, ntok, head, nxt, pk, pc, ictl)
        assign[d] = dst


@njit(cache=True)
def postings_entries(
    head: np.ndarray, nxt: np.ndarray, pk: np.ndarray, pc: np.ndarray, n_words: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every live postings entry of words ``< n_words`` as (word, slot, raw count) arrays."""
    n = 0
    for w in range(min(n_words, head.shape[0])):
        e = head[w]
        while e >= 0:
            if pc[e] > 0.0:
                n += 1
            e = nxt[e]
    ws = np.empty(n, dtype=np.int64)
    ks = np.empty(n, dtype=np.int64)
    cs = np.empty(n, dtype=np.float64)
    i = 0
    for w in range(min(n_words, head.shape[0])):
        e = head[w]
        while e >= 0:
            if pc[e] > 0.0:
                ws[i] = w
                ks[i] = pk[e]
                cs[i] = pc[e]
                i += 1
            e = nxt[e]
    return ws, ks, cs


@njit(cache=True)
def words_in_use(
    head: np.ndarray, nxt: np.ndarray, pk: np.ndarray, pc: np.ndarray, alive: np.ndarray,
    n_words: int,
) -> np.ndarray:  # fmt: skip
    """``out[w]`` for ``w < n_words``: whether some live cluster counts word ``w`` (a postings
    entry of a live slot with a positive count) — the words vocabulary compaction keeps."""
    out = np.zeros(n_words, dtype=np.bool_)
    for w in range(min(n_words, head.shape[0])):
        e = head[w]
        while e >= 0:
            if alive[pk[e]] and pc[e] > 0.0:
                out[w] = True
                break
            e = nxt[e]
    return out
