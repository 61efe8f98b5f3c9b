"""The ``dpmm`` model: collapsed Dirichlet-process mixture of multinomials, CRP seating of each
batch plus collapsed Gibbs rejuvenation (paper 004 eq. 4, MStream-style one-pass seating)."""

from __future__ import annotations

import math
from collections.abc import Collection

import numpy as np

from noveld.models.base import BatchResult, DocBatch, FitTest, StatsDelta
from noveld.models.dpmm.bursts import split_bursts
from noveld.models.dpmm.clusters import Move, ensure_clusters
from noveld.models.dpmm.config import DPMMConfig, decay_factor
from noveld.models.dpmm.delta import batch_delta, births_after_merges, delta_from_entries
from noveld.models.dpmm.merges import merge_births
from noveld.models.dpmm.replay import (
    UncountedWords,
    advance_documents,
    no_uncounted_words,
    replay_delta,
)
from noveld.models.dpmm.retirement import retire_clusters
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels.tempering import document_tempering
from noveld.models.suffstats import MultinomialStats


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
            cfg.document_concentration,
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
        tau = document_tempering(float(nd), cfg.document_concentration)
        log_mass = math.log(max(m_rest - cfg.discount, 1e-3))
        loo = (log_mass if tau == 1.0 else 0.0) - kern.log_rising(
            max(stats.ntok[k] * g - nd, 0.0) + vbeta, nd
        )
        for w, c in zip(words.tolist(), counts.tolist(), strict=True):
            x = have.get(w, 0.0) - c
            if x > 0.0:
                if c == 1:
                    loo += math.log1p(x / cfg.beta)
                else:
                    loo += kern.log_rising(x + cfg.beta, c) - kern.log_rising(cfg.beta, c)
        if tau != 1.0:
            loo = log_mass + tau * loo
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
                document_tempering(float(nd), cfg.document_concentration),
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
        """:func:`retire_clusters` under this model's limits, its known categories kept."""
        cfg = self.config
        return retire_clusters(stats, self._pinned, cfg.retire_min_mass, cfg.max_active_clusters)

    def _split_bursts(
        self, batch: DocBatch, assign: np.ndarray, stats: MultinomialStats, forced: np.ndarray
    ) -> int:
        """:func:`split_bursts` with this model's configuration and known categories."""
        log_alpha = self.log_alpha(len(batch))
        return split_bursts(batch, assign, stats, forced, self.config, log_alpha, self._pinned)

    def _merge(self, batch: DocBatch, assign: np.ndarray, stats: MultinomialStats) -> list[Move]:
        """:func:`merge_births` with this model's configuration and known categories."""
        log_alpha = self.log_alpha(len(batch))
        return merge_births(batch, assign, stats, self.config, log_alpha, self._pinned)

    _delta = staticmethod(batch_delta)
    _delta_from_entries = staticmethod(delta_from_entries)
    _merge_births = staticmethod(births_after_merges)

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


def warm_up() -> None:
    """Compile (first run) or load (cached) the numba kernels on a throwaway state, so that
    timings of real work do not include JIT compilation."""
    model = DPMM(DPMMConfig(rejuvenation_sweeps=1))
    stats = model.new_state()
    docs = [[0, 1, 2], [2, 3, 3, *range(4, 24)]]  # a short and a long document
    model.partial_fit(DocBatch.from_docs(docs, 24), stats, np.random.default_rng(0))
    stats.compact(0.01)
