"""A dense (reserved id × slot) index of the postings entries of the vector's dimension words,
so the hybrid model reads and writes its resultants without walking the dimensions' postings
lists (every cluster holds an entry on each of them: the lists are as long as the clusters).

The index is kept beside the pool, never persisted: entries are allocated at the head of their
word's list with ascending positions, so the entries allocated since the index was last synced
are the ones at each list's head past the pool length it was synced at; a compaction moves
every entry and the index is rebuilt. :func:`add_word_counts_indexed` and
:func:`gather_resultants_indexed` give the values of their walking forms
(:func:`~noveld.models.kernels.multinomial.add_word_counts`,
:func:`~noveld.models.kernels.vmf_table.gather_resultants_t`) bit for bit.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from noveld.models.kernels.multinomial.pool import add_counts_in_order


@njit(cache=True, nogil=True)
def sync_index(
    idx: np.ndarray, dim_words: np.ndarray, head: np.ndarray, nxt: np.ndarray, pk: np.ndarray,
    since: int,
) -> None:  # fmt: skip
    """Record in ``idx[c, k]`` the entries of dimension word ``dim_words[c]`` at positions
    ``≥ since`` (all of them with ``since = 0``): the head of each list, newest first."""
    for c in range(dim_words.shape[0]):
        w = dim_words[c]
        if w >= head.shape[0]:
            continue
        e = head[w]
        while e >= since:
            idx[c, pk[e]] = e
            e = nxt[e]


@njit(cache=True, nogil=True)
def stable_order(words: np.ndarray) -> np.ndarray:
    """``np.argsort(words, kind="mergesort")`` of non-negative ids by a counting sort (linear
    in the entries and the largest id)."""
    n_ids = 0
    for j in range(words.shape[0]):
        n_ids = max(n_ids, words[j] + 1)
    start = np.zeros(n_ids + 1, dtype=np.int64)
    for j in range(words.shape[0]):
        start[words[j] + 1] += 1
    for w in range(n_ids):
        start[w + 1] += start[w]
    order = np.empty(words.shape[0], dtype=np.int64)
    for j in range(words.shape[0]):
        order[start[words[j]]] = j
        start[words[j]] += 1
    return order


@njit(cache=True, nogil=True)
def add_word_counts_indexed(
    slots: np.ndarray, words: np.ndarray, raw_counts: np.ndarray, head: np.ndarray,
    nxt: np.ndarray, pk: np.ndarray, pc: np.ndarray, ictl: np.ndarray, col_of: np.ndarray,
    idx: np.ndarray,
) -> None:  # fmt: skip
    """:func:`~noveld.models.kernels.multinomial.add_word_counts` with the entries of the
    dimension words (``col_of[w] ≥ 0``: column of word w in ``idx``) looked up in the synced
    index instead of their lists, and the ones allocated recorded there. Entries are taken and
    allocated in the same order, so the pool comes out identical."""
    if words.shape[0] == 0:
        return
    add_counts_in_order(
        stable_order(words), slots, words, raw_counts, head, nxt, pk, pc, ictl, col_of, idx
    )


@njit(cache=True, nogil=True)
def gather_resultants_indexed(
    idx: np.ndarray, pc: np.ndarray, p: int, kmax: int, scale: float, out: np.ndarray
) -> None:
    """``out[j, k]``: the resultant of slot k on dimension j (true units, × ``scale``), as
    :func:`~noveld.models.kernels.vmf_table.gather_resultants_t` sums it (positive entry
    first, then the negative one), read from the index (rows: positive ids, then negative)."""
    for j in range(p):
        for k in range(kmax):
            v = 0.0
            e = idx[j, k]
            if e >= 0:
                v += 1.0 * pc[e] * scale
            e = idx[p + j, k]
            if e >= 0:
                v += -1.0 * pc[e] * scale
            out[j, k] = v


@njit(cache=True, nogil=True)
def merge_entries(
    ukey: np.ndarray, wc: np.ndarray, v1: int, pos_part: np.ndarray, neg_part: np.ndarray,
    order: np.ndarray, ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """A batch's (cluster, word, count) entries in key order (cluster · ``v1`` + word): the
    words' (sorted keys ``ukey``, counts ``wc``) merged with the vectors' non-zero parts (row
    r of ``pos_part`` and ``neg_part`` side by side: cluster r on reserved ids ``ids``;
    ``order`` sorts ``ids``), as :func:`merge_entries_reference` orders them."""
    p = pos_part.shape[1]
    n_vec = 0
    for r in range(pos_part.shape[0]):
        for j in range(p):
            n_vec += (pos_part[r, j] != 0.0) + (neg_part[r, j] != 0.0)
    n = ukey.shape[0] + n_vec
    e_cluster = np.empty(n, np.int64)
    e_word = np.empty(n, np.int64)
    e_count = np.empty(n)
    i = 0
    o = 0
    for r in range(pos_part.shape[0]):
        for c in range(order.shape[0]):
            src = order[c]
            x = pos_part[r, src] if src < p else neg_part[r, src - p]
            if x != 0.0:
                key = r * v1 + ids[src]
                while i < ukey.shape[0] and ukey[i] <= key:
                    e_cluster[o], e_word[o], e_count[o] = ukey[i] // v1, ukey[i] % v1, wc[i]
                    i += 1
                    o += 1
                e_cluster[o], e_word[o], e_count[o] = r, ids[src], x
                o += 1
    while i < ukey.shape[0]:
        e_cluster[o], e_word[o], e_count[o] = ukey[i] // v1, ukey[i] % v1, wc[i]
        i += 1
        o += 1
    return e_cluster, e_word, e_count


def merge_entries_reference(
    ukey: np.ndarray, wc: np.ndarray, v1: int, pos_part: np.ndarray, neg_part: np.ndarray,
    order: np.ndarray, ids: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """:func:`merge_entries` in numpy: the vectors' entries found with ``np.nonzero`` (by
    cluster, then reserved id: in key order), the words' put in their places among them."""
    parts = np.concatenate([pos_part, neg_part], 1)[:, order]
    rows, cols = np.nonzero(parts)
    at = np.searchsorted(rows * v1 + ids[order][cols], ukey) + np.arange(ukey.shape[0])
    vec = np.ones(ukey.shape[0] + rows.shape[0], dtype=np.bool_)
    vec[at] = False
    e_cluster, e_word = np.empty(vec.shape[0], np.int64), np.empty(vec.shape[0], np.int64)
    e_count = np.empty(vec.shape[0])
    e_cluster[at], e_word[at], e_count[at] = ukey // v1, ukey % v1, wc
    e_cluster[vec], e_word[vec], e_count[vec] = rows, ids[order][cols], parts[rows, cols]
    return e_cluster, e_word, e_count
