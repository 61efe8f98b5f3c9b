"""Sufficient statistics of a Dirichlet–multinomial mixture: the value type the models mutate.

``MultinomialStats`` holds, per cluster slot, the document mass ``m``, the token mass ``ntok``
and the cluster–word counts in a postings pool (see ``kernels.multinomial``). Values are raw:
true = raw × ``scale`` (lazy forgetting). Slots are array positions; ``uid`` maps them to stable
cluster ids that are never reused.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from noveld.models.kernels import multinomial as kern
from noveld.models.lineage import Lineage

_RENORMALIZE_BELOW = 1e-150


def _grow(a: np.ndarray, n: int, fill: float | int | bool) -> np.ndarray:
    out = np.full(n, fill, dtype=a.dtype)
    out[: a.shape[0]] = a
    return out


@dataclass
class MultinomialStats:
    """Cluster statistics for the collapsed multinomial likelihood, with growable capacity."""

    m: np.ndarray = field(default_factory=lambda: np.zeros(64))
    ntok: np.ndarray = field(default_factory=lambda: np.zeros(64))
    alive: np.ndarray = field(default_factory=lambda: np.zeros(64, dtype=np.bool_))
    fresh: np.ndarray = field(default_factory=lambda: np.zeros(64, dtype=np.bool_))
    uid: np.ndarray = field(default_factory=lambda: np.full(64, -1, dtype=np.int64))
    free_stack: np.ndarray = field(default_factory=lambda: np.zeros(64, dtype=np.int64))
    head: np.ndarray = field(default_factory=lambda: np.full(1024, -1, dtype=np.int64))
    nxt: np.ndarray = field(default_factory=lambda: np.full(4096, -1, dtype=np.int64))
    pk: np.ndarray = field(default_factory=lambda: np.zeros(4096, dtype=np.int64))
    pc: np.ndarray = field(default_factory=lambda: np.zeros(4096))
    ictl: np.ndarray = field(default_factory=lambda: np.zeros(kern.ICTL_SIZE, dtype=np.int64))
    scale: float = 1.0
    dirty_slots: list[int] = field(default_factory=list)
    # young clusters (persisted) and merged-away uids, for reconciling replicas
    lineage: Lineage = field(default_factory=Lineage)
    #: compactions so far (not persisted): they move every postings entry, so indexes of
    #: entry positions kept beside the pool are rebuilt when it changes
    compactions: int = 0

    # ---- capacity -------------------------------------------------------------------------
    @property
    def kmax(self) -> int:
        """High-water mark of used slots; slots ≥ kmax have never been used."""
        return int(self.ictl[kern.KMAX])

    def reserve(self, new_clusters: int, new_entries: int, vocab_size: int) -> None:
        """Grow arrays so a batch can open ``new_clusters`` and allocate ``new_entries``."""
        need_k = self.kmax + new_clusters
        if need_k > self.m.shape[0]:
            n = max(need_k, 2 * self.m.shape[0])
            self.m = _grow(self.m, n, 0.0)
            self.ntok = _grow(self.ntok, n, 0.0)
            self.alive = _grow(self.alive, n, False)
            self.fresh = _grow(self.fresh, n, False)
            self.uid = _grow(self.uid, n, -1)
            self.free_stack = _grow(self.free_stack, n, 0)
        if vocab_size > self.head.shape[0]:
            self.head = _grow(self.head, max(vocab_size, 2 * self.head.shape[0]), -1)
        need_p = int(self.ictl[kern.POOL_USED]) + new_entries
        if need_p > self.pk.shape[0]:
            self.compact()
            need_p = int(self.ictl[kern.POOL_USED]) + new_entries
            if need_p > self.pk.shape[0]:
                n = max(need_p, 2 * self.pk.shape[0])
                self.nxt = _grow(self.nxt, n, -1)
                self.pk = _grow(self.pk, n, 0)
                self.pc = _grow(self.pc, n, 0.0)

    def compact(self, prune_below: float = 0.0, uncounted: np.ndarray | None = None) -> None:
        """Drop postings of dead clusters and of counts ≤ ``prune_below`` (true units, so faded
        words leave the pool under forgetting); recycle retired slots. ``uncounted``: ids of
        the words whose counts are not tokens (not in ``ntok``), pruned without touching it."""
        self.compactions += 1
        flags = np.zeros(self.head.shape[0], dtype=np.bool_)
        if uncounted is not None and uncounted.shape[0]:
            flags[uncounted[uncounted < flags.shape[0]]] = True
        kern.compact_postings(
            self.head,
            self.nxt,
            self.pk,
            self.pc,
            self.alive,
            self.ntok,
            self.ictl,
            prune_below / self.scale,
            flags,
        )

        for k in self.dirty_slots:
            self.free_stack[self.ictl[kern.NFREE]] = k
            self.ictl[kern.NFREE] += 1
        self.dirty_slots = []

    def words_in_use(self, n_words: int) -> np.ndarray:
        """Mask over word ids ``< n_words``: whether some live cluster counts the word."""
        mask: np.ndarray = kern.words_in_use(
            self.head, self.nxt, self.pk, self.pc, self.alive, n_words
        )
        return mask

    def renumbered(self, kept: np.ndarray, n_words: int) -> MultinomialStats:
        """A copy with word ``kept[i]`` as word ``i`` (``kept`` ascending, a superset of
        :meth:`words_in_use` among the ``n_words``): vocabulary compaction.

        Compacts the postings first (dead clusters' entries out; scoring bit-identical), so the
        words left out hold no entry. The renumbering keeps the words' order, so every
        document's words stay sorted alike and scores are summed in the same order: the copy
        scores bit-identically to ``self`` under the mapping. The copy shares the postings pool
        and the cluster arrays with ``self``: keep one of the two.
        """
        self.compact()
        head = self.head[: min(n_words, self.head.shape[0])]
        outside = np.ones(head.shape[0], dtype=np.bool_)
        outside[kept[kept < head.shape[0]]] = False
        if np.any(head[outside] >= 0) or np.any(self.head[head.shape[0] :] >= 0):
            raise ValueError("a word left out of the renumbering is still counted")
        new_head = np.full(max(1024, kept.shape[0]), -1, dtype=np.int64)
        inside = kept[kept < head.shape[0]]
        new_head[: inside.shape[0]] = head[inside]
        return replace(
            self,
            head=new_head,
            dirty_slots=list(self.dirty_slots),
            lineage=self.lineage.copy(),
        )

    # ---- decay ----------------------------------------------------------------------------
    def decay(self, factor: float) -> None:
        """Multiply every statistic by ``factor`` (lazily, through the global scale)."""
        self.scale *= factor
        if self.scale < _RENORMALIZE_BELOW:
            self.m *= self.scale
            self.ntok *= self.scale
            self.pc *= self.scale
            self.scale = 1.0

    # ---- queries --------------------------------------------------------------------------
    def active_slots(self) -> np.ndarray:
        """Slots of live clusters, ascending."""
        slots: np.ndarray = np.flatnonzero(self.alive[: self.kmax])
        return slots

    def mass(self, slots: np.ndarray) -> np.ndarray:
        """True (decayed) document mass of the given slots."""
        out: np.ndarray = self.m[slots] * self.scale
        return out

    def word_counts(self, slot: int) -> tuple[np.ndarray, np.ndarray]:
        """True word counts of one cluster as (word ids, counts)."""
        ws, cs = kern.cluster_word_counts(slot, self.head, self.nxt, self.pk, self.pc)
        return ws, cs * self.scale

    def slot_of(self, uid: int, retired_too: bool = False) -> int:
        """Slot of live cluster ``uid``, or −1. ``retired_too``: else the slot of a cluster
        retired since the last compaction, whose word counts stay in the pool until then (to
        describe a cluster born and evicted in one step)."""
        k = self.kmax
        hit = np.flatnonzero(self.uid[:k] == uid)
        live = [int(h) for h in hit.tolist() if self.alive[h]]
        if live:
            return live[0]
        return int(hit[0]) if retired_too and hit.shape[0] else -1

    def retire(self, slots: np.ndarray) -> None:
        """Kill clusters; their slots are reused only after the next compaction."""
        for k in slots:
            self.alive[k] = False
            self.m[k] = 0.0
            self.ntok[k] = 0.0
            self.dirty_slots.append(int(k))

    @classmethod
    def from_clusters(
        cls,
        uids: list[int],
        m_raw: list[float],
        n_raw: list[float],
        words: list[tuple[np.ndarray, np.ndarray]],
        scale: float,
        next_uid: int,
        docs_seen: int,
        vocab_size: int,
    ) -> MultinomialStats:
        """Statistics from per-cluster raw values (a store's layout), clusters in slot order."""
        s = cls()
        nnz = sum(int(w.shape[0]) for w, _ in words)
        s.reserve(len(uids), nnz, vocab_size)
        for k, (uid, mk, nk, (ws, cs)) in enumerate(zip(uids, m_raw, n_raw, words, strict=True)):
            s.alive[k] = True
            s.uid[k] = uid
            s.m[k] = mk
            s.ntok[k] = nk
            for w, c in zip(ws.tolist(), cs.tolist(), strict=True):
                e = kern.find_or_alloc(int(w), k, s.head, s.nxt, s.pk, s.pc, s.ictl)
                s.pc[e] = c
        s.ictl[kern.KMAX] = len(uids)
        s.ictl[kern.NEXT_UID] = next_uid
        s.ictl[kern.DOCS_SEEN] = docs_seen
        s.scale = scale
        return s

    # ---- persistence ----------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """Compact, self-describing arrays for a snapshot (no pickle), of a compacted copy.

        The live statistics are left as they are: compacting them recycles retired slots, so
        where the next new cluster lands — and with it the slot order sampled seating draws
        over — depended on when a snapshot happened to be written (every
        ``state.snapshot_interval_s`` seconds): two runs of one seed diverged."""
        c = self.detached()
        c.compact()
        used = int(c.ictl[kern.POOL_USED])
        kmax = c.kmax
        return {
            "m": c.m[:kmax],
            "ntok": c.ntok[:kmax],
            "alive": c.alive[:kmax],
            "uid": c.uid[:kmax],
            "free_stack": c.free_stack[: int(c.ictl[kern.NFREE])],
            "head": c.head,
            "nxt": c.nxt[:used],
            "pk": c.pk[:used],
            "pc": c.pc[:used],
            "ictl": c.ictl,
            "scale": np.array([c.scale]),
            # merge candidates: a restarted writer merges as a clean one does
            "young_uid": np.fromiter(c.lineage.young, dtype=np.int64),
            "young_step": np.fromiter(c.lineage.young.values(), dtype=np.int64),
        }

    def detached(self) -> MultinomialStats:
        """A copy sharing no array (nor reconciliation state) with ``self``."""
        return replace(
            self,
            m=self.m.copy(),
            ntok=self.ntok.copy(),
            alive=self.alive.copy(),
            fresh=self.fresh.copy(),
            uid=self.uid.copy(),
            free_stack=self.free_stack.copy(),
            head=self.head.copy(),
            nxt=self.nxt.copy(),
            pk=self.pk.copy(),
            pc=self.pc.copy(),
            ictl=self.ictl.copy(),
            dirty_slots=list(self.dirty_slots),
            lineage=self.lineage.copy(),
        )

    @classmethod
    def from_arrays(cls, a: dict[str, np.ndarray]) -> MultinomialStats:
        """Inverse of :meth:`to_arrays`."""
        kmax = a["m"].shape[0]
        cap = max(64, kmax)
        s = cls()
        s.m = _grow(a["m"].astype(np.float64), cap, 0.0)
        s.ntok = _grow(a["ntok"].astype(np.float64), cap, 0.0)
        s.alive = _grow(a["alive"].astype(np.bool_), cap, False)
        s.fresh = np.zeros(cap, dtype=np.bool_)
        s.uid = _grow(a["uid"].astype(np.int64), cap, -1)
        s.free_stack = _grow(a["free_stack"].astype(np.int64), cap, 0)
        s.head = a["head"].astype(np.int64).copy()
        pcap = max(4096, a["pk"].shape[0])
        s.nxt = _grow(a["nxt"].astype(np.int64), pcap, -1)
        s.pk = _grow(a["pk"].astype(np.int64), pcap, 0)
        s.pc = _grow(a["pc"].astype(np.float64), pcap, 0.0)
        ictl = a["ictl"].astype(np.int64)
        s.ictl = np.zeros(max(kern.ICTL_SIZE, ictl.shape[0]), dtype=np.int64)
        s.ictl[: ictl.shape[0]] = ictl  # snapshots from before a counter was added
        s.scale = float(a["scale"][0])
        if "young_uid" in a:  # absent from snapshots written before reconciliation
            # young since a log step; snapshots that counted documents: young from now on
            since = a.get("young_step")
            if since is None:
                since = np.full(a["young_uid"].shape[0], s.ictl[kern.STEPS], dtype=np.int64)
            young = zip(a["young_uid"].tolist(), since.tolist(), strict=True)
            s.lineage = Lineage(young={int(u): int(t) for u, t in young})
        return s
