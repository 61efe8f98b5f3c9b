"""Collapsed Dirichlet-process mixture of multinomials: CRP seating + batch Gibbs rejuvenation.

DESIGN §5.1; papers 004 (collapsed sampler, eq. 4) and the MStream-style one-pass seating.
Pure: arrays in, arrays/deltas out; the statistics object passed in is the model's working state
and is updated in place, and the returned :class:`StatsDelta` says exactly what changed so a
durable store can apply the same change.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Literal

import numpy as np

from noveld.models.base import BatchResult, DocBatch, FitTest, StatsDelta
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats

AlphaScaling = Literal["none", "batch"]
SPLIT_ROUNDS = 3  # burst-split rounds per batch at most (each stops early when nothing moves)


@dataclass(frozen=True)
class DPMMConfig:
    """Hyperparameters of the streaming DP mixture (all part of the model fingerprint)."""

    alpha: float = 0.03
    beta: float = 0.01
    alpha_scaling: AlphaScaling = "batch"
    rejuvenation_sweeps: int = 2
    deterministic: bool = False
    half_life_docs: float = 0.0
    retire_min_mass: float = 0.05
    max_active_clusters: int = 5000
    discount: float = 0.5
    prune_below: float = 0.01
    merge: bool = True
    merge_scope: Literal["births", "all"] = "births"
    absorb_margin: float = 20.0  # log-odds a cluster needs to be merged into a known category
    split: bool = True

    def __post_init__(self) -> None:
        if self.alpha <= 0 or self.beta <= 0:
            raise ValueError("alpha and beta must be positive")
        if self.rejuvenation_sweeps < 0:
            raise ValueError("rejuvenation_sweeps must be >= 0")
        if self.half_life_docs < 0:
            raise ValueError("half_life_docs must be >= 0 (0 = no forgetting)")
        if self.max_active_clusters < 1:
            raise ValueError("max_active_clusters must be >= 1")


def decay_factor(half_life_docs: float, n_docs: int) -> float:
    """Multiplier after ``n_docs`` documents for a half-life in documents (0 = no decay)."""
    if half_life_docs <= 0:
        return 1.0
    return float(2.0 ** (-n_docs / half_life_docs))


UncountedWords = Callable[[], np.ndarray]
"""Ids of the vocabulary entries whose counts are not tokens (hdp context values and fields,
vmf dimensions: :func:`noveld.models.vocabulary.uncounted_ids`); asked only when pruning."""


def no_uncounted_words() -> np.ndarray:
    """Every entry is a token (plain text models)."""
    return np.zeros(0, dtype=np.int64)


def advance_documents(
    stats: MultinomialStats,
    n_docs: int,
    half_life_docs: float,
    prune_below: float,
    uncounted: UncountedWords = no_uncounted_words,
) -> None:
    """Count one more batch of ``n_docs`` documents; under forgetting, prune faded words
    whenever the count crosses a multiple of a quarter half-life.

    Forgotten words leave the pool so memory stays bounded; pruning happens at fixed document
    counts so a resumed or replaying process prunes exactly where a clean one does. Pruned
    ``uncounted`` entries leave the token masses alone (they were never in them).
    """
    seen = int(stats.ictl[kern.DOCS_SEEN])
    stats.ictl[kern.DOCS_SEEN] = seen + n_docs
    stats.ictl[kern.STEPS] += 1
    if half_life_docs > 0:
        period = max(int(half_life_docs / 4), 1)
        if (seen + n_docs) // period > seen // period:
            stats.compact(prune_below, uncounted())


def replay_delta(
    stats: MultinomialStats,
    delta: StatsDelta,
    half_life_docs: float,
    prune_below: float = DPMMConfig.prune_below,
    foreign: bool = False,
    uncounted: UncountedWords = no_uncounted_words,
) -> None:
    """Apply a batch's :class:`StatsDelta` to statistics, in the order ``partial_fit`` changed
    them: decay, add the batch's counts (opening clusters unknown here), merges, retire, count
    the documents and prune on schedule.

    This is how a restarted process rebuilds its model from a checkpoint plus the delta log, and
    how a replica takes in the batches other replicas committed (DESIGN §6, scale-out). With
    integer counts (no forgetting) the result equals the writer's statistics exactly (and for
    ``svi`` always: its writer applies its own step through :func:`apply_additions`). With
    ``foreign`` the clusters the delta opened become merge candidates of the next batch (two
    replicas may each open a cluster for one story).
    """
    apply_additions(stats, delta, foreign)
    finish_delta(stats, delta, half_life_docs, prune_below, uncounted)


def apply_additions(stats: MultinomialStats, delta: StatsDelta, foreign: bool = False) -> None:
    """First half of :func:`replay_delta`: the decay and the batch's additions."""
    stats.decay(delta.decay)
    kmax = stats.kmax
    slot_of = {int(u): k for k, u in enumerate(stats.uid[:kmax].tolist()) if stats.alive[k]}
    uids = delta.cluster_uids.tolist()
    unknown = [u for u in uids if u not in slot_of]
    vocab_size = int(delta.word_ids.max()) + 1 if delta.word_ids.shape[0] else 0
    stats.reserve(len(unknown), int(delta.word_ids.shape[0]), vocab_size)
    next_uid = int(stats.ictl[kern.NEXT_UID])
    for u in unknown:
        stats.ictl[kern.NEXT_UID] = u
        k = kern.open_cluster(stats.alive, stats.uid, stats.fresh, stats.free_stack, stats.ictl)
        stats.fresh[k] = False
        slot_of[u] = k
    born = set(delta.born_uids.tolist())
    for i, u in enumerate(uids):
        if foreign and u in born and u in slot_of:  # another writer's birth: a merge candidate
            stats.young_slots.append(slot_of[u])
            stats.young_words.append(delta.word_ids[delta.word_cluster == i])
    stats.ictl[kern.NEXT_UID] = max([next_uid, *(u + 1 for u in delta.born_uids.tolist())])
    slots = np.array([slot_of[u] for u in uids], dtype=np.int64)
    inv = 1.0 / stats.scale
    stats.m[slots] += delta.dm * inv
    stats.ntok[slots] += delta.dntok * inv
    kern.add_word_counts(
        slots[delta.word_cluster],
        delta.word_ids.astype(np.int64),
        delta.word_count * inv,
        stats.head,
        stats.nxt,
        stats.pk,
        stats.pc,
        stats.ictl,
    )


def finish_delta(
    stats: MultinomialStats,
    delta: StatsDelta,
    half_life_docs: float,
    prune_below: float,
    uncounted: UncountedWords = no_uncounted_words,
) -> None:
    """Second half of :func:`replay_delta`: merges, retirements, the document count."""
    kmax = stats.kmax
    slot_of = {int(u): k for k, u in enumerate(stats.uid[:kmax].tolist()) if stats.alive[k]}
    for src_uid, dst_uid in delta.merges.tolist():
        src, dst = slot_of.get(src_uid), slot_of.get(dst_uid)
        if src is None or dst is None:
            continue  # retired here already (another replica's view differed)
        move_counts(stats, src, dst)
    gone = [slot_of[u] for u in delta.retired_uids.tolist() if u in slot_of]
    if gone:
        stats.retire(np.array(gone, dtype=np.int64))
    advance_documents(stats, delta.documents(), half_life_docs, prune_below, uncounted)


def move_counts(
    stats: MultinomialStats, src: int, dst: int
) -> tuple[float, float, np.ndarray, np.ndarray]:
    """Merge slot ``src`` into ``dst`` (every count moves; ``src`` is left empty, not retired).
    Returns the moved raw mass, raw tokens, word ids and raw counts."""
    words, _ = kern.cluster_word_counts(src, stats.head, stats.nxt, stats.pk, stats.pc)
    words = np.sort(words.astype(np.int64))
    stats.reserve(0, words.shape[0], int(words.max()) + 1 if words.shape[0] else 0)
    m_raw, n_raw = float(stats.m[src]), float(stats.ntok[src])
    out_w = np.empty(words.shape[0], dtype=np.int64)
    out_c = np.empty(words.shape[0])
    n = kern.move_cluster(
        src, dst, stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc, stats.ictl,
        words, out_w, out_c,
    )  # fmt: skip
    return m_raw, n_raw, out_w[:n].copy(), out_c[:n].copy()


def absorption_gains(
    stats: MultinomialStats,
    known_slots: np.ndarray,
    eligible: np.ndarray,
    scan_words: np.ndarray,
    beta: float,
    vbeta: float,
    log_new: float,
    discount: float,
) -> np.ndarray:
    """``gains[i, k]``: the collapsed posterior log-ratio of merging cluster k into known
    category ``known_slots[i]`` (:func:`kern.merge_gains`: the Dirichlet–multinomial marginal
    over ``scan_words`` and the Pitman–Yor partition prior), −inf where ``eligible[k]`` is
    False (known categories themselves, and whatever else may not be absorbed)."""
    kmax = stats.kmax
    gains = np.empty((known_slots.shape[0], kmax))
    kern.merge_gains(
        known_slots, scan_words, stats.m, stats.ntok, stats.alive, stats.head, stats.nxt,
        stats.pk, stats.pc, kmax, stats.scale, beta, vbeta, log_new, discount, gains,
    )  # fmt: skip
    gains[:, ~eligible[:kmax]] = -np.inf
    return gains


def greedy_absorptions(
    gains: np.ndarray, known_slots: np.ndarray, margin: float, taken: set[int]
) -> list[tuple[int, int]]:
    """(source slot, known slot) pairs whose gain exceeds ``margin``, best first; each source
    is absorbed once (a known category may absorb several) and none of ``taken`` is."""
    rows, cols = np.nonzero(gains > margin)
    order = np.argsort(-gains[rows, cols], kind="stable")
    out: list[tuple[int, int]] = []
    for i in order.tolist():
        src, dst = int(cols[i]), int(known_slots[rows[i]])
        if src in taken:
            continue
        taken.add(src)
        out.append((src, dst))
    return out


def ensure_clusters(stats: MultinomialStats, known: np.ndarray | None, n: int) -> np.ndarray:
    """Slots of the known-label clusters ``known`` (uid per document, −1 = none), opening the
    missing ones empty (they are categories, not births); −1 where no label is known."""
    forced = np.full(n, -1, dtype=np.int64)
    if known is None or not np.any(known >= 0):
        return forced
    kmax = stats.kmax
    slot_of = {int(u): k for k, u in enumerate(stats.uid[:kmax].tolist()) if stats.alive[k]}
    wanted = [u for u in dict.fromkeys(known[known >= 0].tolist()) if u not in slot_of]
    stats.reserve(len(wanted), 0, 0)
    next_uid = int(stats.ictl[kern.NEXT_UID])
    for u in wanted:
        stats.ictl[kern.NEXT_UID] = u
        k = kern.open_cluster(stats.alive, stats.uid, stats.fresh, stats.free_stack, stats.ictl)
        stats.fresh[k] = False
        stats.m[k] = stats.ntok[k] = 0.0
        slot_of[u] = k
    stats.ictl[kern.NEXT_UID] = next_uid
    for d in np.flatnonzero(known >= 0).tolist():
        forced[d] = slot_of[int(known[d])]
    return forced


def warm_up() -> None:
    """Compile (first run) or load (cached) the numba kernels on a throwaway state, so that
    timings of real work do not include JIT compilation."""
    model = DPMM(DPMMConfig(rejuvenation_sweeps=1))
    stats = model.new_state()
    docs = [[0, 1, 2], [2, 3, 3, *range(4, 24)]]  # a short and a long document
    model.partial_fit(DocBatch.from_docs(docs, 24), stats, np.random.default_rng(0))
    stats.compact(0.01)


class DPMM:
    """The ``dpmm`` model: one-pass CRP seating with collapsed Gibbs rejuvenation of the batch."""

    kind = "dpmm"

    def __init__(self, config: DPMMConfig) -> None:
        self.config = config
        self._pinned: Collection[int] = ()
        #: the vocabulary's non-token entries, for pruning (bound by the pipeline)
        self.uncounted_words: UncountedWords = no_uncounted_words

    def new_state(self) -> MultinomialStats:
        """Empty statistics."""
        return MultinomialStats()

    def log_alpha(self, batch_size: int) -> float:
        """log of the new-cluster weight; α·|B| under batch scaling (MStream's αD)."""
        a = self.config.alpha
        if self.config.alpha_scaling == "batch":
            a *= max(batch_size, 1)
        return math.log(a)

    def partial_fit(
        self,
        batch: DocBatch,
        stats: MultinomialStats,
        rng: np.random.Generator,
        known: np.ndarray | None = None,
        pinned: Collection[int] = (),
    ) -> BatchResult:
        """Seat a batch, rejuvenate it, forget, retire; return assignments, births and the delta.

        ``known[d] ≥ 0`` is the cluster uid of document d's known label: it is seated there (the
        cluster is opened if new) and never moved. Clusters in ``pinned`` (known categories) are
        never retired or merged away.
        """
        cfg = self.config
        nb = len(batch)
        forced = ensure_clusters(stats, known, nb)
        self._pinned = pinned
        sweeps = cfg.rejuvenation_sweeps
        f = decay_factor(cfg.half_life_docs, nb)
        stats.decay(f)
        stats.reserve(nb * (1 + sweeps), batch.nnz * (1 + sweeps), batch.vocab_size)
        stats.fresh[:] = False
        uniforms = rng.random(nb * (1 + sweeps))
        assign = np.empty(nb, dtype=np.int64)
        log_norm = np.empty(nb)
        margin = np.empty(nb)
        lp = np.empty(stats.m.shape[0])
        prior_mass = float(stats.m[stats.alive].sum() * stats.scale)  # what the batch meets
        kern.seat_batch(
            batch.ptr,
            batch.words,
            batch.counts,
            batch.lengths,
            uniforms,
            sweeps,
            self.log_alpha(nb),
            cfg.beta,
            batch.n_words * cfg.beta,
            cfg.deterministic,
            stats.scale,
            cfg.discount,
            stats.m,
            stats.ntok,
            stats.alive,
            stats.fresh,
            stats.uid,
            stats.head,
            stats.nxt,
            stats.pk,
            stats.pc,
            stats.free_stack,
            stats.ictl,
            lp,
            assign,
            log_norm,
            margin,
            forced,
        )
        if cfg.split:
            self._split_bursts(batch, assign, stats, forced)
        born = self._births(assign, stats, margin)
        uids = stats.uid[assign]
        own_births = {u for u, _, _ in born}
        moves = self._merge(batch, assign, stats) if cfg.merge else []
        merged = [
            (int(stats.uid[src]), int(stats.uid[dst]), int(stats.uid[src]) in own_births)
            for src, dst, *_ in moves
        ]
        if merged:
            born = self._merge_births(born, [(a, b) for a, b, _ in merged])
        retired = self._retire(stats)
        advance_documents(stats, nb, cfg.half_life_docs, cfg.prune_below, self.uncounted_words)
        delta = self._delta(batch, uids, f, born, retired, moves, stats)
        final = uids.copy()
        for src_uid, dst_uid, _ in merged:
            final[final == src_uid] = dst_uid
        lpt = self._log_predictive_per_token(batch, log_norm, prior_mass, nb)
        return BatchResult(final, born, retired, delta, lpt, merged=merged)

    def apply_delta(self, stats: MultinomialStats, delta: StatsDelta) -> None:
        """Replay another writer's batch (see :func:`replay_delta`)."""
        cfg = self.config
        replay_delta(
            stats, delta, cfg.half_life_docs, cfg.prune_below, uncounted=self.uncounted_words
        )

    def predict(self, batch: DocBatch, stats: MultinomialStats) -> np.ndarray:
        """MAP cluster uid of each document without changing the statistics (-1 = new)."""
        stats.reserve(0, 0, batch.vocab_size)
        kmax = stats.kmax
        lp = np.empty(max(kmax, 1))
        out = np.empty(2)
        res = np.empty(len(batch), dtype=np.int64)
        for d in range(len(batch)):
            w, c = batch.doc(d)
            lp_new = self._score(stats, w, c, int(batch.lengths[d]), lp, batch.n_words, len(batch))
            k = kern.choose(lp, kmax, lp_new, 0.0, True, out, stats.uid)
            res[d] = -1 if k < 0 else stats.uid[k]
        return res

    def term_weights(self, stats: MultinomialStats, uid: int) -> tuple[np.ndarray, np.ndarray]:
        """The cluster's word counts (true units); empty for an unknown uid. A cluster retired
        in this step still has them until the pool is next compacted."""
        slot = stats.slot_of(uid, retired_too=True)
        if slot < 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return stats.word_counts(slot)

    def refound_test(self, stats: MultinomialStats, batch: DocBatch) -> FitTest:
        """:meth:`still_belongs` on the live statistics, with the batch's V and size."""
        size, vocab = len(batch), batch.n_words

        def fits(uid: int, words: np.ndarray, counts: np.ndarray) -> bool:
            return self.still_belongs(words, counts, uid, stats, vocab, size)

        return fits

    def still_belongs(
        self,
        words: np.ndarray,
        counts: np.ndarray,
        uid: int,
        stats: MultinomialStats,
        n_words: int,
        batch_size: int = 1,
    ) -> bool:
        """Would a member of cluster ``uid`` be seated there again, taken out of it (one
        collapsed Gibbs step, paper 004 eq. 4, MAP)? Read-only.

        The novelty tracker asks this of a candidate's first members when it confirms the
        candidate: a stray document that happened to found a cluster a later story took over is
        not that story's first document.
        """
        k = stats.slot_of(uid)
        if k < 0:
            return False
        g = stats.scale
        m_rest = stats.m[k] * g - 1.0
        if m_rest <= 0.0:
            return True  # its only member: nothing else to compare with
        stats.reserve(0, 0, int(words.max()) + 1 if words.shape[0] else 0)
        kmax = stats.kmax
        lp = np.empty(max(kmax, 1))
        lp_new = self._score(stats, words, counts, int(counts.sum()), lp, n_words, batch_size)
        cfg = self.config
        nd = int(counts.sum())
        vbeta = n_words * cfg.beta
        cw, cc = stats.word_counts(k)
        have = dict(zip(cw.tolist(), cc.tolist(), strict=True))
        # kern.score_document's terms on the counts without the document; ties (within
        # kern.TIE_TOL) break as seating breaks them
        loo = math.log(max(m_rest - cfg.discount, 1e-3)) - kern.log_rising(
            max(stats.ntok[k] * g - nd, 0.0) + vbeta, nd
        )
        for w, c in zip(words.tolist(), counts.tolist(), strict=True):
            x = have.get(w, 0.0) - c
            if x > 0.0:
                if c == 1:
                    loo += math.log1p(x / cfg.beta)
                else:
                    loo += kern.log_rising(x + cfg.beta, c) - kern.log_rising(cfg.beta, c)
        return kern.keeps_its_seat(lp, kmax, k, loo, lp_new, stats.uid)

    def seating_probabilities(
        self,
        words: np.ndarray,
        counts: np.ndarray,
        stats: MultinomialStats,
        n_words: int,
        batch_size: int = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(slots, probabilities) over live clusters followed by the new-cluster probability."""
        stats.reserve(0, 0, int(words.max()) + 1 if words.shape[0] else 0)
        kmax = stats.kmax
        lp = np.empty(max(kmax, 1))
        lp_new = self._score(stats, words, counts, int(counts.sum()), lp, n_words, batch_size)
        slots = stats.active_slots()
        logits = np.append(lp[slots], lp_new)
        p = np.exp(logits - logits.max())
        return slots, p / p.sum()

    def _score(
        self,
        stats: MultinomialStats,
        words: np.ndarray,
        counts: np.ndarray,
        nd: int,
        lp: np.ndarray,
        n_words: int,
        batch_size: int,
    ) -> float:
        """Log seating weights of one document into ``lp`` (read-only); returns the new one."""
        cfg = self.config
        return float(
            kern.score_document(
                words,
                counts,
                nd,
                lp,
                stats.m,
                stats.ntok,
                stats.alive,
                stats.head,
                stats.nxt,
                stats.pk,
                stats.pc,
                stats.kmax,
                stats.scale,
                cfg.beta,
                n_words * cfg.beta,
                self.log_alpha(batch_size),
                cfg.discount,
            )
        )

    # ---- internals ------------------------------------------------------------------------
    @staticmethod
    def _births(
        assign: np.ndarray, stats: MultinomialStats, margin: np.ndarray
    ) -> list[tuple[int, int, float]]:
        born: list[tuple[int, int, float]] = []
        seen: set[int] = set()
        for d, k in enumerate(assign):
            k = int(k)
            if stats.fresh[k] and k not in seen:
                seen.add(k)
                born.append((int(stats.uid[k]), d, float(margin[d])))
        return born

    def prune(
        self, stats: MultinomialStats, pinned: Collection[int] = ()
    ) -> list[tuple[int, float, str]]:
        """Retirement outside a batch (statistics built offline, ``noveld fit``): the faded
        clusters and those beyond ``max_active_clusters`` go, ``pinned`` ones stay."""
        self._pinned = pinned
        stats.fresh[:] = False
        return self._retire(stats)

    def _retire(self, stats: MultinomialStats) -> list[tuple[int, float, str]]:
        """Retire faded clusters (mass < retire_min_mass) and evict the lightest beyond
        ``max_active_clusters``; returns (uid, remaining mass, "faded" | "evicted")."""
        cfg = self.config
        slots = stats.active_slots()
        pinned = self._pinned
        if pinned:
            slots = slots[~np.isin(stats.uid[slots], np.fromiter(pinned, dtype=np.int64))]
        mass = stats.mass(slots)
        old = ~stats.fresh[slots]
        faded = slots[old & (mass < cfg.retire_min_mass)]
        keep = slots[~np.isin(slots, faded)]
        excess = keep.shape[0] - cfg.max_active_clusters
        keep = keep[~stats.fresh[keep]]  # never evict a cluster this batch just filled
        evicted = keep[np.lexsort((keep, stats.mass(keep)))[:excess]] if excess > 0 else keep[:0]
        out = [(int(stats.uid[k]), float(stats.mass(np.array([k]))[0]), "faded") for k in faded]
        out += [
            (int(stats.uid[k]), float(stats.mass(np.array([k]))[0]), "evicted") for k in evicted
        ]
        if out:
            stats.retire(np.concatenate([faded, evicted]))
        return out

    @staticmethod
    def _delta(
        batch: DocBatch,
        uids: np.ndarray,
        f: float,
        born: list[tuple[int, int, float]],
        retired: list[tuple[int, float, str]],
        moves: list[tuple[int, int, float, float, np.ndarray, np.ndarray]],
        stats: MultinomialStats,
    ) -> StatsDelta:
        """The batch's documents as seated (before merges), then each merge as a move of the
        source cluster's counts into the survivor, then the retirements (merged sources too)."""
        return DPMM._delta_from_entries(
            batch,
            uids,
            np.ones(len(batch)),
            batch.lengths.astype(np.float64),
            np.repeat(uids, np.diff(batch.ptr)),
            batch.words,
            batch.counts.astype(np.float64),
            f,
            born,
            retired,
            moves,
            stats,
        )

    @staticmethod
    def _delta_from_entries(
        batch: DocBatch,
        doc_uids: np.ndarray,
        doc_m: np.ndarray,
        doc_n: np.ndarray,
        e_uids: np.ndarray,
        e_words: np.ndarray,
        e_counts: np.ndarray,
        f: float,
        born: list[tuple[int, int, float]],
        retired: list[tuple[int, float, str]],
        moves: list[tuple[int, int, float, float, np.ndarray, np.ndarray]],
        stats: MultinomialStats,
    ) -> StatsDelta:
        """Aggregate per-document (``doc_*``) and per-word-entry (``e_*``) additions in true
        units by cluster uid and (cluster, word), append the merges' moves, and build the
        delta."""
        merges = np.array(
            [(int(stats.uid[src]), int(stats.uid[dst])) for src, dst, *_ in moves],
            dtype=np.int64,
        ).reshape(-1, 2)
        retired = retired + [(int(stats.uid[src]), 0.0, "merged") for src, *_ in moves]
        cl, inv = np.unique(doc_uids, return_inverse=True)
        dm = np.bincount(inv, weights=doc_m, minlength=cl.shape[0])
        dntok = np.bincount(inv, weights=doc_n, minlength=cl.shape[0])
        pair_cluster = np.searchsorted(cl, e_uids)
        if e_uids.shape[0] and (
            pair_cluster.max() >= cl.shape[0] or not np.array_equal(cl[pair_cluster], e_uids)
        ):
            raise RuntimeError("delta: word entries of a cluster no document of the batch added")
        key = pair_cluster.astype(np.int64) * (batch.vocab_size + 1) + e_words
        ukey, kinv = np.unique(key, return_inverse=True)
        wc = np.bincount(kinv, weights=e_counts, minlength=ukey.shape[0])
        return StatsDelta(
            decay=f,
            cluster_uids=cl.astype(np.int64),
            dm=dm,
            dntok=dntok,
            word_cluster=(ukey // (batch.vocab_size + 1)).astype(np.int64),
            word_ids=(ukey % (batch.vocab_size + 1)).astype(np.int64),
            word_count=wc,
            born_uids=np.array([b[0] for b in born], dtype=np.int64),
            retired_uids=np.array([r[0] for r in retired], dtype=np.int64),
            merges=merges,
        )

    @staticmethod
    def _merge_births(
        born: list[tuple[int, int, float]], merged: list[tuple[int, int]]
    ) -> list[tuple[int, int, float]]:
        """Births after merges: a merged-away birth is no birth, but when two births of this
        batch merge, the survivor is founded by the earlier founding document of the two."""
        by_uid = {u: (d, score) for u, d, score in born}
        for src, dst in merged:
            if src in by_uid and dst in by_uid:
                (ds, ss), (dd, sd) = by_uid[src], by_uid[dst]
                by_uid[dst] = (min(ds, dd), max(ss, sd))
            by_uid.pop(src, None)
        return sorted(((u, d, s) for u, (d, s) in by_uid.items()), key=lambda b: b[1])

    def _split_bursts(
        self, batch: DocBatch, assign: np.ndarray, stats: MultinomialStats, forced: np.ndarray
    ) -> int:
        """Give bursts their own clusters; returns how many groups moved.

        Seated one at a time, each document of a new story that arrives in a burst joins the
        closest old cluster (a lone document rarely outweighs an old cluster's mass); as a group
        they explain each other. Up to :data:`SPLIT_ROUNDS` rounds of: (1) for each older
        cluster holding two or more of the batch's documents, in uid order (so slot layout —
        restarts, replicas — cannot change the outcome), move the best subgroup of them
        (:func:`kern.best_split_group`) to a new cluster when that raises the collapsed
        posterior (:func:`kern.split_gain`, exact); (2) re-seat the batch's other documents
        in older clusters, each moving only if its MAP cluster is one opened in this batch.
        Known categories and groups holding a labelled document are left alone.
        """
        moved = 0
        for _ in range(SPLIT_ROUNDS):
            n = self._split_round(batch, assign, stats, forced)
            if n == 0:
                break
            moved += n
            self._reseat_into_new(batch, assign, stats, forced)
        return moved

    def _split_round(
        self, batch: DocBatch, assign: np.ndarray, stats: MultinomialStats, forced: np.ndarray
    ) -> int:
        """Step (1) of :meth:`_split_bursts`."""
        cfg = self.config
        nb = len(batch)
        theta = math.exp(self.log_alpha(nb))
        n_live = int(stats.alive[: stats.kmax].sum())
        # each cluster's batch documents, in document order: one stable sort, not a scan per slot
        order = np.argsort(assign, kind="stable")
        sorted_slots = assign[order]
        starts = np.flatnonzero(np.r_[True, sorted_slots[1:] != sorted_slots[:-1]])
        ends = np.r_[starts[1:], nb]
        slots = sorted_slots[starts]
        has_forced = np.maximum.reduceat((forced[order] >= 0).astype(np.int8), starts) > 0
        pinned = self._pinned
        ok = (ends - starts >= 2) & ~stats.fresh[slots] & ~has_forced
        if pinned:
            ok &= np.array([int(u) not in pinned for u in stats.uid[slots].tolist()])
        cand = np.flatnonzero(ok)
        cand = cand[np.argsort(stats.uid[slots[cand]], kind="stable")]  # uid order
        if cand.shape[0] == 0:
            return 0
        keep = np.empty(nb, dtype=np.bool_)
        gains = kern.best_split_groups(
            slots[cand], starts[cand], ends[cand], order, batch.ptr, batch.words, batch.counts,
            batch.lengths, stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc,
            stats.scale, cfg.beta, batch.n_words * cfg.beta, theta, cfg.discount, n_live, keep,
        )  # fmt: skip
        moved = 0
        for i in np.flatnonzero(gains > 0.0).tolist():
            k, a, b = int(slots[cand[i]]), int(starts[cand[i]]), int(ends[cand[i]])
            group = order[a:b][keep[a:b]]
            stats.reserve(1, int((batch.ptr[group + 1] - batch.ptr[group]).sum()), 0)
            new = kern.open_cluster(
                stats.alive, stats.uid, stats.fresh, stats.free_stack, stats.ictl
            )
            for d in group.tolist():
                self._move_document(batch, d, k, new, stats)
            assign[group] = new
            moved += 1
        return moved

    def _reseat_into_new(
        self, batch: DocBatch, assign: np.ndarray, stats: MultinomialStats, forced: np.ndarray
    ) -> None:
        """Step (2) of :meth:`_split_bursts`: one MAP Gibbs step for each batch document in an
        older cluster, taken only when it lands in a cluster opened in this batch."""
        cfg = self.config
        pinned = np.zeros(stats.m.shape[0], dtype=np.bool_)
        if self._pinned:
            uids = stats.uid[: stats.kmax].tolist()
            pinned[: stats.kmax] = [int(u) in self._pinned for u in uids]
        kern.reseat_into_fresh(
            batch.ptr, batch.words, batch.counts, batch.lengths, assign, forced, pinned,
            stats.m, stats.ntok, stats.alive, stats.fresh, stats.uid, stats.head, stats.nxt,
            stats.pk, stats.pc, stats.ictl, stats.scale, cfg.beta, batch.n_words * cfg.beta,
            self.log_alpha(len(batch)), cfg.discount,
        )  # fmt: skip

    @staticmethod
    def _move_document(
        batch: DocBatch, d: int, src: int, dst: int, stats: MultinomialStats
    ) -> None:
        """Move batch document ``d``'s counts from cluster slot ``src`` to ``dst``."""
        w, c = batch.doc(d)
        nd = int(batch.lengths[d])
        weight = 1.0 / stats.scale
        for slot, sign in ((src, -1.0), (dst, 1.0)):
            kern.add_document(
                slot, w, c, nd, sign * weight, stats.m, stats.ntok, stats.head, stats.nxt,
                stats.pk, stats.pc, stats.ictl,
            )  # fmt: skip

    def _merge(
        self, batch: DocBatch, assign: np.ndarray, stats: MultinomialStats
    ) -> list[tuple[int, int, float, float, np.ndarray, np.ndarray]]:
        """Merge clusters born in this batch (or by another writer since the last one) into
        another cluster when that raises the collapsed posterior (MAP merge test,
        :func:`kern.merge_gains`); greedy, best gain first, each cluster in one merge at most.

        Returns (source slot, survivor slot, moved raw mass, moved raw tokens, moved word ids,
        moved raw counts) per merge; the sources are dead afterwards.
        """
        cfg = self.config
        fresh_docs = stats.fresh[assign]
        own = np.unique(assign[fresh_docs])
        foreign = [k for k in stats.young_slots if stats.alive[k]]
        young = np.unique(np.concatenate([own, np.array(foreign, dtype=np.int64)]))
        young = young[stats.alive[young]]
        words_parts = [batch.words[np.repeat(fresh_docs, np.diff(batch.ptr))], *stats.young_words]
        stats.young_slots, stats.young_words = [], []
        if young.shape[0] == 0:
            return self._absorb_into_known(batch, assign, stats, [])
        scan = np.unique(np.concatenate(words_parts).astype(np.int64))
        kmax = stats.kmax
        gains = np.empty((young.shape[0], kmax))
        n_live = int(stats.alive[:kmax].sum())
        # PY partition prior: merging K clusters into K−1 divides by θ + (K−1)d
        log_new = math.log(math.exp(self.log_alpha(len(batch))) + cfg.discount * (n_live - 1))
        kern.merge_gains(
            young,
            scan,
            stats.m,
            stats.ntok,
            stats.alive,
            stats.head,
            stats.nxt,
            stats.pk,
            stats.pc,
            kmax,
            stats.scale,
            cfg.beta,
            batch.n_words * cfg.beta,
            log_new,
            cfg.discount,
            gains,
        )
        if cfg.merge_scope == "births":  # only births of the same story are merged
            others = np.ones(kmax, dtype=np.bool_)
            others[young] = False
            gains[:, others] = -np.inf
        best = gains.argmax(axis=1)
        order = np.argsort(-gains[np.arange(young.shape[0]), best], kind="stable")
        used: set[int] = set()
        moves: list[tuple[int, int, float, float, np.ndarray, np.ndarray]] = []
        for i in order.tolist():
            y, k = int(young[i]), int(best[i])
            if gains[i, k] <= 0.0:
                break
            if y in used or k in used:
                continue
            # the survivor is the heavier cluster (the older one when tied)
            src, dst = (
                (y, k) if (stats.m[y], -stats.uid[y]) <= (stats.m[k], -stats.uid[k]) else (k, y)
            )
            if not stats.fresh[src] and src not in young:
                continue
            if int(stats.uid[src]) in self._pinned:
                continue
            m_raw, n_raw, moved_w, moved_c = move_counts(stats, src, dst)
            stats.retire(np.array([src], dtype=np.int64))
            stats.fresh[src] = False
            assign[assign == src] = dst
            moves.append((src, dst, m_raw, n_raw, moved_w, moved_c))
            used.update((y, k))
        return self._absorb_into_known(batch, assign, stats, moves)

    def _absorb_into_known(
        self,
        batch: DocBatch,
        assign: np.ndarray,
        stats: MultinomialStats,
        moves: list[tuple[int, int, float, float, np.ndarray, np.ndarray]],
    ) -> list[tuple[int, int, float, float, np.ndarray, np.ndarray]]:
        """With known categories (``use_labels``): merge other clusters into the known
        categories this batch seated documents in, when the collapsed posterior favours it by
        more than ``absorb_margin`` (log-odds). A story whose first documents came unlabelled
        opens a novel cluster; once its labelled documents reach the known category, the twin
        is absorbed, so later documents find one cluster. The margin is asymmetric on purpose:
        absorbing a truly new story into a known category hides it (measured on news / news-t
        with ``--known-fraction 0.4``: margin 0 lowers known_f1, 5–60 all raise it)."""
        if not self._pinned:
            return moves
        cfg = self.config
        kmax = stats.kmax
        is_known = np.isin(stats.uid[:kmax], np.fromiter(self._pinned, dtype=np.int64))
        is_known &= stats.alive[:kmax]
        touched = np.unique(assign)
        touched = touched[is_known[touched]]
        if touched.shape[0] == 0:
            return moves
        n_live = int(stats.alive[:kmax].sum())
        log_new = math.log(math.exp(self.log_alpha(len(batch))) + cfg.discount * (n_live - 1))
        scan = np.arange(min(stats.head.shape[0], batch.vocab_size), dtype=np.int64)
        eligible = stats.alive[:kmax] & ~is_known
        gains = absorption_gains(
            stats, touched, eligible, scan, cfg.beta, batch.n_words * cfg.beta, log_new,
            cfg.discount,
        )  # fmt: skip
        taken = {int(s) for s, *_ in moves}
        for src, dst in greedy_absorptions(gains, touched, cfg.absorb_margin, taken):
            m_raw, n_raw, moved_w, moved_c = move_counts(stats, src, dst)
            stats.retire(np.array([src], dtype=np.int64))
            stats.fresh[src] = False
            assign[assign == src] = dst
            moves.append((src, dst, m_raw, n_raw, moved_w, moved_c))
        return moves

    def _log_predictive_per_token(
        self, batch: DocBatch, log_norm: np.ndarray, prior_mass: float, nb: int
    ) -> float:
        """Mean log p(document | model before it) per token, from the first-pass normalisers.

        ``p(d) = Σ_k (m_k−δ)/(M+α) p(d|k) + (α+δK)/(M+α) p(d|prior)`` (paper 004 eq. 4 per
        cluster); the seating weights omit the word baseline ``Σ_w log Γ(β+N_dw)/Γ(β)`` (added
        back here) and the normaliser M+α, where M is ``prior_mass`` (the mass the batch met)
        plus the batch's earlier documents.
        """
        tokens = float(batch.lengths.sum())
        if tokens == 0:
            return float("nan")
        base = kern.word_baseline(batch.counts, self.config.beta)
        alpha = math.exp(self.log_alpha(nb))
        norm = np.log(prior_mass + np.arange(nb) + alpha).sum()
        return (float(log_norm.sum()) + base - float(norm)) / tokens
