"""Streaming stochastic variational inference for the DP mixture of multinomials (``svi``).

Paper 001 (Huynh et al., SVI for multilevel clustering: the natural-gradient step of
eqs. 2–4 and the step size ρ_t = (t + τ₀)^(−κ)), Hoffman et al. 2013. Truncated stick-breaking
``q(v_k) = Beta(a_k, b_k)``, ``q(θ_k) = Dir(λ_k)``; the truncation grows by births.

The global variational parameters are kept as expected counts in :class:`MultinomialStats`:
``λ_kw = β + s_kw``, ``a_k = 1 + m_k``, ``b_k = α + Σ_{j>k} m_j``. A natural-gradient step is then
``s ← (1−ρ) s + ρ·D/|B| · Σ_d r_dk N_d·`` (and the same for ``m``), i.e. a global decay by
``1−ρ`` (lazy, through the statistics' scale) plus sparse additions — O(batch nnz), and exactly
a :class:`StatsDelta`, so the Redis store, replay and replicas work unchanged. The global step does
not commute across writers: one writer per namespace.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from noveld.models.base import BatchResult, DocBatch, StatsDelta
from noveld.models.dpmm import (
    DPMM,
    SPLIT_ROUNDS,
    DPMMConfig,
    advance_documents,
    apply_additions,
    ensure_clusters,
)
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels import variational as vkern
from noveld.models.suffstats import MultinomialStats


@dataclass(frozen=True)
class SVIConfig(DPMMConfig):
    """``svi`` hyperparameters: the DP mixture's plus the step-size schedule and corpus size."""

    kappa: float = 0.8  # forgetting rate κ ∈ (0.5, 1]
    tau0: float = 1.0  # delay τ₀ ≥ 0
    corpus_size: float = 0.0  # effective corpus size D; 0 = the documents seen so far
    top_components: int = 3  # responsibilities kept per document
    local_step: Literal["cvb0", "vb"] = "cvb0"
    #: s of the words' length tempering (``DPMMConfig``'s): on for svi, measured to help long
    #: documents and to keep short texts (docs/model.md, "Length tempering in the words models")
    document_concentration: float = 50.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.5 < self.kappa <= 1.0:
            raise ValueError("kappa must be in (0.5, 1] (Robbins–Monro conditions)")
        if self.tau0 < 0 or self.corpus_size < 0 or self.top_components < 1:
            raise ValueError("tau0 and corpus_size must be >= 0, top_components >= 1")


def step_size(t: int, tau0: float, kappa: float) -> float:
    """ρ_t = (t + τ₀)^(−κ) for the t-th batch (t ≥ 1)."""
    return float((t + tau0) ** (-kappa))


class SVI(DPMM):
    """The ``svi`` model: variational local step, natural-gradient global step, births by CRP
    seating against the prior, burst splits (``split``: responsibilities hardened to the top
    component, then ``dpmm``'s split move on the expected counts), MAP merges of new
    components, pruning of faded ones."""

    kind = "svi"
    config: SVIConfig

    def __init__(self, config: SVIConfig) -> None:
        super().__init__(config)

    def partial_fit(
        self,
        batch: DocBatch,
        stats: MultinomialStats,
        rng: np.random.Generator,
        known: np.ndarray | None = None,
        pinned: Collection[int] = (),
    ) -> BatchResult:
        """One SVI step on a mini-batch; returns the MAP component of each document. Known
        labels work as in :meth:`DPMM.partial_fit` (``r = 1`` on the label's component)."""
        cfg = self.config
        nb = len(batch)
        forced = ensure_clusters(stats, known, nb)
        self._pinned = pinned
        top = cfg.top_components
        t = int(stats.ictl[kern.STEPS]) + 1
        rho = step_size(t, cfg.tau0, cfg.kappa)
        corpus = cfg.corpus_size or float(stats.ictl[kern.DOCS_SEEN] + nb)
        gain = rho * corpus / nb
        sweeps = cfg.rejuvenation_sweeps
        # room for the local step's provisional additions and the splits' moves up front: the
        # pool must not compact while they are in it (they are undone entry by entry)
        rounds = SPLIT_ROUNDS if cfg.split else 0
        stats.reserve(
            nb * (1 + sweeps + rounds),
            batch.nnz * (top * (1 + sweeps) + 2 * rounds),
            batch.vocab_size,
        )
        stats.fresh[:] = False
        elogpi, elogpi_new = self._sticks(stats)
        r_slot = np.empty((nb, top), dtype=np.int64)
        r_val = np.empty((nb, top))
        log_norm = np.empty(nb)
        margin = np.empty(nb)
        cap = stats.m.shape[0]
        # The local step adds each document provisionally (so later documents of the batch see
        # it); those additions are then undone bit for bit and the step is applied through the
        # same code replicas use, so the writer's statistics equal any replay of its deltas.
        saved_m, saved_n = stats.m.copy(), stats.ntok.copy()
        prior_mass = float(saved_m[stats.alive].sum() * stats.scale)  # what the batch meets
        used = int(stats.ictl[kern.POOL_USED])
        saved_pc = stats.pc[:used].copy()
        vkern.svi_local_step(
            batch.ptr, batch.words, batch.counts, batch.lengths, self.log_alpha(nb), cfg.beta,
            batch.n_words * cfg.beta, stats.scale, cfg.discount, elogpi, elogpi_new, top,
            cfg.local_step == "vb", stats.m, stats.ntok, stats.alive, stats.fresh, stats.uid,
            stats.head, stats.nxt, stats.pk, stats.pc, stats.free_stack, stats.ictl,
            np.empty(cap), np.empty(cap), r_slot, r_val, log_norm, margin, forced, sweeps,
            cfg.document_concentration,
        )  # fmt: skip
        if cfg.split:  # hard responsibilities, then bursts out of older components (as dpmm)
            vkern.harden_responsibilities(
                batch.ptr, batch.words, batch.counts, batch.lengths, r_slot, r_val, forced,
                stats.scale, stats.m, stats.ntok, stats.head, stats.nxt, stats.pk, stats.pc,
                stats.ictl,
            )  # fmt: skip
            assign = r_slot[:, 0].copy()
            self._split_bursts(batch, assign, stats, forced)
            r_slot[:, 0] = assign
        if stats.m.shape != saved_m.shape or int(stats.ictl[kern.POOL_USED]) < used:
            raise RuntimeError("svi: the statistics were reallocated during the local step")
        stats.m[:], stats.ntok[:] = saved_m, saved_n
        stats.pc[:used] = saved_pc
        stats.pc[used : int(stats.ictl[kern.POOL_USED])] = 0.0
        # components opened in this batch that no document kept (emptied by a sweep) go away
        kept = np.zeros(stats.m.shape[0], dtype=np.bool_)
        kept[r_slot[r_slot >= 0]] = True
        unused = np.flatnonzero(stats.fresh & ~kept)
        if unused.shape[0]:
            stats.retire(unused)
            stats.fresh[unused] = False
        assign = r_slot[:, 0].copy()
        born = self._births(assign, stats, margin)
        own_births = {u for u, _, _ in born}
        uids = stats.uid[r_slot.clip(min=0)]
        # natural-gradient step: s ← (1−ρ)·s + ρ·D/|B|·Σ_d r_dk N_d  (paper 001 eqs. 2–4)
        step = self._svi_delta(batch, uids, r_slot, r_val, 1.0 - rho, gain, born, stats)
        apply_additions(stats, step)
        moves = self._merge(batch, assign, stats) if cfg.merge else []
        merged = [
            (int(stats.uid[src]), int(stats.uid[dst]), int(stats.uid[src]) in own_births)
            for src, dst, *_ in moves
        ]
        if merged:
            born = self._merge_births(born, [(a, b) for a, b, _ in merged])
        retired = self._retire(stats)
        advance_documents(stats, nb, 0.0, cfg.prune_below)
        gone = [u for u, _, _ in merged] + [u for u, _, _ in retired]
        delta = replace(
            step,
            born_uids=np.array([b[0] for b in born], dtype=np.int64),
            merges=np.array([(a, b) for a, b, _ in merged], dtype=np.int64).reshape(-1, 2),
            retired_uids=np.array(gone, dtype=np.int64),
        )
        final = uids[:, 0].copy()
        for src_uid, dst_uid, _ in merged:
            final[final == src_uid] = dst_uid
        lpt = self._log_predictive_per_token(batch, log_norm, prior_mass, nb)
        return BatchResult(final, born, retired, delta, lpt, {"rho": rho}, merged)

    def _sticks(self, stats: MultinomialStats) -> tuple[np.ndarray, float]:
        """E[log π_k] per slot and for a new component. Sticks are ordered by decreasing
        expected size (ties: older first), the ordering that makes the truncated stick-breaking
        posterior least sensitive to label order (Kurihara, Welling & Teh 2007)."""
        slots = stats.active_slots()
        order = slots[np.lexsort((stats.uid[slots], -stats.m[slots]))]
        out = np.full(stats.m.shape[0], -np.inf)
        tmp = np.empty(order.shape[0])
        new = vkern.expected_log_sticks(stats.m[order] * stats.scale, self.config.alpha, tmp)
        out[order] = tmp
        return out, float(new)

    @staticmethod
    def _svi_delta(
        batch: DocBatch,
        uids: np.ndarray,
        r_slot: np.ndarray,
        r_val: np.ndarray,
        decay: float,
        gain: float,
        born: list[tuple[int, int, float]],
        stats: MultinomialStats,
    ) -> StatsDelta:
        """The natural-gradient step as a delta: decay 1−ρ, then ``gain · r_dk · N_d`` per
        (document, component)."""
        nb, top = r_slot.shape
        keep = r_slot >= 0
        doc_of = np.repeat(np.arange(nb), top).reshape(nb, top)[keep]
        pair_uid = uids[keep]
        weight = r_val[keep] * gain
        per_doc_entries = np.diff(batch.ptr)
        # expand (document, component) pairs over the document's words
        rep = per_doc_entries[doc_of]
        starts = batch.ptr[doc_of]
        idx = np.repeat(starts - np.cumsum(rep) + rep, rep) + np.arange(int(rep.sum()))
        e_uids = np.repeat(pair_uid, rep)
        e_words = batch.words[idx]
        e_counts = batch.counts[idx] * np.repeat(weight, rep)
        doc_m = weight
        doc_n = batch.lengths[doc_of] * weight
        delta = DPMM._delta_from_entries(
            batch, pair_uid, doc_m, doc_n, e_uids, e_words, e_counts, decay, born, [], [], stats,
        )  # fmt: skip
        return StatsDelta(**{**delta.__dict__, "n_docs": nb})
