"""The ``dpmm`` model on words and a dense vector at once: a cluster's seating weight is the CRP
prior × the collapsed Dirichlet–multinomial predictive of the document's words × (the collapsed
von Mises–Fisher predictive of its unit vector)^w.

Both views live in the one count store, as they do in their own models: the words as the words
model counts them, the vectors' resultants on the reserved dimension entries exactly as
:class:`~noveld.models.vmf.VMFMixture` keeps them, so deltas, replay, forgetting and retirement
carry both. A document without a vector is scored on its words only, one without words on its
vector only. The view weight ``w`` tempers the vMF factor (w = 0 is the words model, without
its burst splits and merges).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import replace

import numpy as np

from noveld.models import hybrid_known as known
from noveld.models.base import BatchResult, DocBatch, FitTest
from noveld.models.dpmm import (
    advance_documents,
    apply_additions,
    decay_factor,
    ensure_clusters,
    move_counts,
)
from noveld.models.dpmm.reconcile import (
    allowed_pairs,
    greedy_merges,
    merge_candidates,
    scan_words,
)
from noveld.models.hybrid_batch import (
    MemberFeatures,
    SeatingState,
    births_in_order,
    seating_state,
    vector_delta,
    vector_merge_gains,
)
from noveld.models.hybrid_config import HybridConfig as HybridConfig  # re-exported
from noveld.models.hybrid_index import DimensionIndex
from noveld.models.hybrid_prior import VectorFrame
from noveld.models.kernels import hybrid as hkern
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels import vmf as vkern
from noveld.models.kernels import vmf_table as vtable
from noveld.models.suffstats import MultinomialStats
from noveld.models.vmf import FEATURE_SCALE, VMFMixture


class HybridMixture(VMFMixture):
    """CRP seating under words × vectors, with Gibbs rejuvenation of the batch, forgetting,
    retirement and known labels as in :class:`~noveld.models.vmf.VMFMixture`."""

    kind = "dpmm"
    likelihood = "hybrid"
    config: HybridConfig

    def bind_dimension_words(self, pos_ids: list[int], neg_ids: list[int]) -> None:
        super().bind_dimension_words(pos_ids, neg_ids)
        self._index = DimensionIndex(*self._dimension_ids())

    def resultants(self, stats: MultinomialStats, extra_decay: float = 1.0) -> np.ndarray:
        """:meth:`VMFMixture.resultants`, the same values, read through the dimension index
        (the (kmax × p) array returned is column-major)."""
        self._dimension_ids()  # bound
        return self._index.resultants(stats, stats.scale * extra_decay)

    @property
    def table(self) -> np.ndarray:
        """The seating's table of log C_p(κ√q) (:func:`~noveld.models.kernels.hybrid.
        normalizer_table`, built once per dimension and κ)."""
        return vtable.normalizer_table(self.config.dimension, self.kappa)

    def partial_fit(
        self,
        batch: DocBatch,
        stats: MultinomialStats,
        rng: np.random.Generator,
        known: np.ndarray | None = None,
        pinned: Collection[int] = (),
    ) -> BatchResult:
        """Seat a batch under both views, rejuvenate it, forget, retire; the step is applied
        through :func:`apply_additions` (the code replicas use), so the writer equals any
        replay. ``batch.emb`` may be None (no document has a vector) or hold zero rows."""
        cfg = self.config
        nb = len(batch)
        emb = batch.emb
        if emb is None:
            emb = np.zeros((nb, cfg.dimension))
        if emb.shape != (nb, cfg.dimension):
            raise ValueError(f"hybrid: the batch's vectors must be ({nb}, {cfg.dimension})")
        pos, neg = self._dimension_ids()
        self.learn_concentration(stats)
        forced = ensure_clusters(stats, known, nb)
        self._pinned = pinned
        stats.fresh[:] = False
        f = decay_factor(cfg.half_life_docs, nb)
        kmax = stats.kmax
        r = self.resultants(stats, f)
        frame = self.vector_frame(stats, r, f, emb)
        scored = frame.vectors(emb)
        s = seating_state(stats, frame.resultants, scored, f)
        prior_rn2, prior_dots = frame.prior.new_slot(scored)
        local, loc = np.unique(batch.words, return_inverse=True)
        sweeps = cfg.rejuvenation_sweeps
        uniforms = rng.random(nb * (1 + sweeps))
        assign = np.empty(nb, dtype=np.int64)
        log_norm = np.empty(nb)
        margin = np.empty(nb)
        hkern.seat_batch(
            batch.ptr, batch.words, batch.counts, batch.lengths, loc.astype(np.int64),
            local.shape[0], s.gram, s.dots, s.mass, s.ntok, s.rn2, s.live, s.tie_uid, kmax,
            stats.head, stats.nxt, stats.pk, stats.pc, stats.scale * f, cfg.beta,
            batch.n_words * cfg.beta, cfg.discount, self.log_alpha(nb), cfg.dimension,
            self.kappa, self.table, cfg.weight, cfg.deterministic, False, uniforms, sweeps,
            forced, assign, log_norm, margin, cfg.tempering(batch.lengths), prior_rn2, prior_dots,
        )  # fmt: skip
        uids, born = births_in_order(assign, kmax, margin, stats)
        delta = vector_delta(replace(batch, emb=emb), uids, np.concatenate([pos, neg]), f, born)
        apply_additions(stats, delta, self._index.add_counts)
        slot_of = {int(u): k for k, u in enumerate(stats.uid[: stats.kmax].tolist())}
        for u, _, _ in born:
            stats.fresh[slot_of[u]] = True
        pairs = self._merge_young(batch, uids, born, stats) if cfg.merge else []
        pairs += self._absorb(batch, uids, stats, pairs, forced)
        own = {u for u, _, _ in born}
        merged = [(src, dst, src in own) for src, dst in pairs]
        final = uids.copy()
        for src, dst in pairs:
            final[final == src] = dst
        if pairs:
            born = self._merge_births(born, pairs)
        retired = self._retire(stats)
        advance_documents(stats, nb, cfg.half_life_docs, cfg.prune_below, self.uncounted_words)
        delta = replace(
            delta,
            retired_uids=np.array([s for s, _ in pairs] + [u for u, _, _ in retired], np.int64),
            merges=np.array(pairs, dtype=np.int64).reshape(-1, 2),
            born_uids=np.array([u for u, _, _ in born], dtype=np.int64),
            n_docs=nb,
        )
        return BatchResult(final, born, retired, delta, float("nan"), merged=merged)

    def _merge_young(
        self,
        batch: DocBatch,
        uids: np.ndarray,
        born: list[tuple[int, int, float]],
        stats: MultinomialStats,
    ) -> list[tuple[int, int]]:
        """Merge the clusters born in this batch — and, with replicas, other writers' recent
        births (:func:`merge_candidates`, as ``dpmm`` does) — into another cluster when that
        raises the collapsed posterior under both views (the words' merge gain of
        :func:`~noveld.models.kernels.multinomial.merge_gains` + w × the vectors'); greedy,
        best gain first, each cluster in one merge at most, the lighter one merged away (the
        lower uid surviving between writers). Applied to ``stats`` at once; returns (source
        uid, survivor uid) pairs."""
        cfg = self.config
        kmax = stats.kmax
        born_uids = [u for u, _, _ in born]
        now = np.array([stats.slot_of(u) for u in born_uids], dtype=np.int64)
        kind_of = merge_candidates(stats, now, cfg.young_steps)
        young = np.flatnonzero(kind_of >= 0)
        if young.shape[0] == 0:
            return []
        in_born = np.isin(uids, np.array(born_uids, dtype=np.int64))
        scan = scan_words(stats, young, batch.words[np.repeat(in_born, np.diff(batch.ptr))])
        scan = np.setdiff1d(scan, np.concatenate(self._dimension_ids()))  # words only
        n_live = int(stats.alive[:kmax].sum())
        log_new = math.log(math.exp(self.log_alpha(len(batch))) + cfg.discount * (n_live - 1))
        gains = np.empty((young.shape[0], kmax))
        kern.merge_gains(
            young, scan, stats.m, stats.ntok, stats.alive, stats.head, stats.nxt, stats.pk,
            stats.pc, kmax, stats.scale, cfg.beta, batch.n_words * cfg.beta, log_new,
            cfg.discount, gains,
        )  # fmt: skip
        if cfg.weight:
            gains += cfg.weight * self.vector_merge_gains(stats, young)
        gains[~allowed_pairs(young, kind_of, stats.uid, cfg.merge_scope)] = -np.inf
        pairs: list[tuple[int, int]] = []
        for src, dst in greedy_merges(gains, young, kind_of, stats, self._pinned):
            move_counts(stats, src, dst)
            stats.retire(np.array([src], dtype=np.int64))
            stats.fresh[src] = False
            pairs.append((int(stats.uid[src]), int(stats.uid[dst])))
            stats.lineage.record(*pairs[-1], int(stats.ictl[kern.STEPS]))
        if cfg.young_steps > 0:
            step = int(stats.ictl[kern.STEPS])
            for k in now.tolist():
                if stats.alive[k]:
                    stats.lineage.add_young(int(stats.uid[k]), step)
        return pairs

    def _absorb(
        self,
        batch: DocBatch,
        uids: np.ndarray,
        stats: MultinomialStats,
        merged: list[tuple[int, int]],
        forced: np.ndarray,
    ) -> list[tuple[int, int]]:
        """Clusters absorbed into the known categories the batch seated documents in
        (:func:`~noveld.models.hybrid_known.absorb_into_known`), after this batch's merges;
        ``forced``: each document's known slot (−1: no label)."""
        if not self._pinned:
            return []
        seated, taken = known.seated_after_merges(stats, uids, merged)
        labels = known.batch_label_counts(uids, forced, self._pinned)
        return known.absorb_into_known(
            stats, seated, self._pinned,
            np.concatenate(self._dimension_ids()), batch.vocab_size, batch.n_words,
            self.config, self.log_alpha(len(batch)), self.config.weight,
            self.vector_merge_gains, taken, labels,
        )  # fmt: skip

    def vector_merge_gains(self, stats: MultinomialStats, young: np.ndarray) -> np.ndarray:
        """:func:`~noveld.models.hybrid_batch.vector_merge_gains` of clusters ``young`` with
        every slot, under the κ and the vector frame in use."""
        frame = self.vector_frame(stats, self.resultants(stats))
        return vector_merge_gains(
            frame.resultants, young, self.config.dimension, self.kappa, frame.prior.pseudo
        )

    def vector_frame(
        self, stats: MultinomialStats, r: np.ndarray, f: float = 1.0, emb: np.ndarray | None = None
    ) -> VectorFrame:
        """How the vectors are scored (:class:`VectorFrame`: centred when ``config.centre``,
        else under the fitted direction prior unless it is off), for the resultants ``r`` and
        the batch's vectors ``emb``, decayed by ``f`` more."""
        cfg = self.config
        prior = cfg.prior_cosine if cfg.direction_prior else None
        return VectorFrame.of(stats, r, cfg.centre, prior, f, emb)

    def member_features(self, batch: DocBatch) -> Sequence[tuple[np.ndarray, np.ndarray]]:
        """What the novelty tracker keeps of a member for re-founding: its words and counts,
        then its vector as the dimensions' reserved entries with integer values x_j · 2^20
        (built when asked: the tracker keeps a few members of young candidates only)."""
        pos, neg = self._dimension_ids()
        return MemberFeatures(batch, pos, neg)

    def refound_test(self, stats: MultinomialStats, batch: DocBatch) -> FitTest:
        """:meth:`still_belongs_both` on the live statistics, for members kept as
        :meth:`member_features`; the resultants are gathered once, at the first question."""
        pos, neg = self._dimension_ids()
        sign = np.zeros(int(max(pos.max(), neg.max())) + 1)
        sign[pos], sign[neg] = 1.0, -1.0
        dim_of = np.zeros(sign.shape[0], dtype=np.int64)
        dim_of[pos] = dim_of[neg] = np.arange(pos.shape[0])
        size, n_words = len(batch), batch.n_words
        cache: list[VectorFrame] = []

        def fits(uid: int, ids: np.ndarray, values: np.ndarray) -> bool:
            if not cache:
                cache.append(self.vector_frame(stats, self.resultants(stats)))
                self.learn_concentration(stats)
            is_dim = np.zeros(ids.shape[0], dtype=np.bool_)
            inside = ids < sign.shape[0]
            is_dim[inside] = sign[ids[inside]] != 0.0
            x = np.zeros(self.config.dimension)
            dims = ids[is_dim]
            x[dim_of[dims]] = sign[dims] * values[is_dim] / FEATURE_SCALE
            words, counts = ids[~is_dim], values[~is_dim]
            frame = cache[0]
            x = frame.vectors(x[None, :])[0]
            return self.still_belongs_both(words, counts, x, frame, uid, stats, n_words, size)

        return fits

    def still_belongs_both(
        self,
        words: np.ndarray,
        counts: np.ndarray,
        x: np.ndarray,
        frame: VectorFrame,
        uid: int,
        stats: MultinomialStats,
        n_words: int,
        batch_size: int = 1,
    ) -> bool:
        """Would a member (words, unit vector x or zeros) of cluster ``uid`` be seated there
        again, taken out of it (one MAP collapsed Gibbs step under both views, the seating
        kernel's own scores)? Read-only."""
        k = stats.slot_of(uid)
        if k < 0:
            return False
        if stats.m[k] * stats.scale - 1.0 <= 0.0:
            return True  # its only member
        x = x.reshape(1, -1)
        s = seating_state(stats, frame.resultants, x, 1.0)
        nd = int(counts.sum())
        # the member taken out of slot k: its mass, tokens, vector, and its words (a negative
        # overlay on the pool's counts)
        s.mass[k] -= 1.0
        s.ntok[k] = max(s.ntok[k] - nd, 0.0)
        if x.any():
            s.dots[k, 0] -= 1.0
            s.rn2[k] = max(s.rn2[k] - 2.0 * s.dots[k, 0] - 1.0, 0.0)
        lp, lp_new = self._document_scores(
            s, 0, words, counts, stats, n_words, batch_size, bool(x.any()), frame, x[0], out_of=k
        )
        return kern.keeps_its_seat(lp, stats.kmax, k, float(lp[k]), lp_new, stats.uid)

    def predict(self, batch: DocBatch, stats: MultinomialStats) -> np.ndarray:
        """MAP cluster uid of each document under both views (−1 = new), each against the
        statistics alone (not the batch's other documents); read-only."""
        nb = len(batch)
        emb = batch.emb if batch.emb is not None else np.zeros((nb, self.config.dimension))
        self.learn_concentration(stats)
        frame = self.vector_frame(stats, self.resultants(stats))
        emb = frame.vectors(emb)
        s = seating_state(stats, frame.resultants, emb, 1.0)
        kmax = stats.kmax
        out = np.empty(2)
        res = np.empty(nb, dtype=np.int64)
        for d in range(nb):
            w, c = batch.doc(d)
            lp, lp_new = self._document_scores(
                s, d, w, c, stats, batch.n_words, nb, s.gram[d, d] > 0, frame, emb[d]
            )
            k = kern.choose(lp, kmax, lp_new, 0.0, True, out, stats.uid)
            res[d] = -1 if k < 0 else stats.uid[k]
        return res

    def _document_scores(
        self,
        s: SeatingState,
        d: int,
        words: np.ndarray,
        counts: np.ndarray,
        stats: MultinomialStats,
        n_words: int,
        batch_size: int,
        has_vector: bool,
        frame: VectorFrame,
        x: np.ndarray,
        out_of: int = -1,
    ) -> tuple[np.ndarray, float]:
        """The seating kernel's log weights of one document (row ``d`` of the working copy
        ``s``, its vector ``x`` as ``frame`` scores it) into the existing clusters, and the
        new cluster's; ``out_of``: the slot its words
        are counted in and must be taken out of (a negative overlay on the pool's counts)."""
        cfg = self.config
        n = words.shape[0]
        kmax = stats.kmax
        counts = counts.astype(np.int64)
        lp = np.empty(kmax + 1)
        log_mass = hkern.log_masses(s.mass, cfg.discount)
        lp_new = hkern.word_scores(
            0, np.array([0, n]), words.astype(np.int64), counts, np.arange(n, dtype=np.int64),
            int(counts.sum()), kmax, kmax, log_mass, s.ntok, s.live, stats.head, stats.nxt,
            stats.pk, stats.pc, stats.scale, cfg.beta, n_words * cfg.beta, cfg.discount,
            self.log_alpha(batch_size), np.arange(n + 1, dtype=np.int64),
            np.full(n, out_of, dtype=np.int64), -counts, np.full(n, int(out_of >= 0)),
            np.zeros(kmax + 1), np.empty(kmax + 1, dtype=np.int64), np.zeros(kmax + 1), lp,
            float(cfg.tempering(np.array([counts.sum()]))[0]),
        )  # fmt: skip
        if has_vector and cfg.weight:
            p, kappa = cfg.dimension, self.kappa
            logc_r = vtable.log_normalizers_sq(s.rn2, self.table, p, kappa)
            prior_rn2, prior_dot = frame.prior.new_slot(x[None, :])
            lp_new += hkern.add_vector_scores(
                d, kmax, s.live, s.rn2, logc_r, s.dots, p, kappa, self.table,
                vkern.log_vmf_normalizer(p, kappa), cfg.weight, lp, prior_rn2, prior_dot[0],
            )  # fmt: skip
        return lp, lp_new
