"""The postings pool of cluster–word counts and the cluster slots: entries, allocation, opening
and freeing clusters, replaying counts, compaction and read-out.

For every word ``w`` the pool holds a singly linked list (``head[w]`` → ``nxt[e]`` …) of entries
``(pk[e] = cluster slot, pc[e] = raw count)``. Statistics are stored *raw*; the true value is
``raw * g`` where ``g`` is a global decay scale (lazy exponential forgetting).

Integer control block ``ictl``: ``[pool_used, kmax, nfree, next_uid, docs_seen, steps]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

POOL_USED = 0
KMAX = 1
NFREE = 2
NEXT_UID = 3
DOCS_SEEN = 4
STEPS = 5  # batches applied (the SVI step counter t)
ICTL_SIZE = 6


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


@njit(cache=True, nogil=True)
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
    if words.shape[0] == 0:
        return
    no_index = np.full(0, -1, dtype=np.int64)
    add_counts_in_order(
        np.argsort(words, kind="mergesort"), slots, words, raw_counts, head, nxt, pk, pc, ictl,
        no_index, np.empty((0, 0), dtype=np.int64),
    )  # fmt: skip


@njit(cache=True, nogil=True)
def add_counts_in_order(
    order: np.ndarray, slots: np.ndarray, words: np.ndarray, raw_counts: np.ndarray,
    head: np.ndarray, nxt: np.ndarray, pk: np.ndarray, pc: np.ndarray, ictl: np.ndarray,
    col_of: np.ndarray, idx: np.ndarray,
) -> None:  # fmt: skip
    """:func:`add_word_counts` over the additions in ``order`` (a stable sort by word). A word
    with ``col_of[w] ≥ 0`` has its entries at column ``col_of[w]`` of the slot index ``idx``
    (the hybrid's dimension words) instead of in a walk of its list, and records the entries
    it allocates there; ``col_of`` may be shorter than the vocabulary (empty: no index)."""
    n = words.shape[0]
    kmax = 0
    for j in range(n):
        kmax = max(kmax, slots[j] + 1)
    entry_of = np.full(kmax, -1, dtype=np.int64)
    wanted = np.zeros(kmax, dtype=np.bool_)
    start = 0
    while start < n:
        w = words[order[start]]
        c = col_of[w] if w < col_of.shape[0] else -1
        stop = start
        distinct = 0
        while stop < n and words[order[stop]] == w:
            k = slots[order[stop]]
            if not wanted[k]:
                wanted[k] = True
                distinct += 1
            stop += 1
        if c >= 0:
            for i in range(start, stop):
                k = slots[order[i]]
                entry_of[k] = idx[c, k]
        else:
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
                if c >= 0:
                    idx[c, k] = e
            pc[e] += raw_counts[j]
        for i in range(start, stop):
            k = slots[order[i]]
            wanted[k] = False
            entry_of[k] = -1
        start = stop


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


@njit(cache=True)
def words_of_clusters(
    member: np.ndarray, head: np.ndarray, nxt: np.ndarray, pk: np.ndarray, pc: np.ndarray
) -> np.ndarray:
    """Sorted ids of the words any cluster slot k with ``member[k]`` holds — one pass over the
    pool for all of them (:func:`cluster_word_counts` is one pass per cluster)."""
    out = np.empty(head.shape[0], dtype=np.int64)
    n = 0
    kmax = member.shape[0]
    for w in range(head.shape[0]):
        e = head[w]
        while e >= 0:
            k = pk[e]
            if k < kmax and member[k] and pc[e] > 0.0:
                out[n] = w
                n += 1
                break
            e = nxt[e]
    return out[:n].copy()
