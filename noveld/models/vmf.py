"""The ``dpmm`` model on document embeddings: CRP seating under the von Mises–Fisher likelihood.

The same CRP seating as the multinomial likelihood; paper 003. Each document is a unit
vector x ∈ R^p; cluster k keeps its mass ``m_k`` and resultant ``r_k = Σ x``. Seating is the
Pitman–Yor CRP of :class:`~noveld.models.dpmm.DPMM` with the collapsed vMF predictive of
:mod:`noveld.models.kernels.vmf` in place of the Dirichlet–multinomial one, then rejuvenation
sweeps over the batch. The concentration κ is shared and set from a typical member-to-mean
cosine through paper 003's eq. 10, a configured one or one learned from the clusters
(:mod:`noveld.models.concentration`). The base measure on a cluster's mean direction is a vMF
around the stream's mean direction, fitted to the stream
(:class:`~noveld.models.direction_prior.DirectionPrior`; the uniform density when
``direction_prior`` is off): embeddings sit in a narrow cone, and under the uniform one the
first cluster takes the stream.

Storage reuses the count store unchanged: dimension j of a resultant is two non-negative
reserved vocabulary entries, ``Σ max(x_j, 0)`` and ``Σ max(−x_j, 0)`` (:func:`dimension_tokens`),
so snapshots, the Redis delta log, replay across replicas, forgetting, merges of counts and
retirement all carry it. A document's text words, when it has any, are counted too, for the
events' top terms only; they do not enter the likelihood.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np

from noveld.models.base import BatchResult, DocBatch, FitTest, StatsDelta
from noveld.models.concentration import learned_cosine
from noveld.models.direction_prior import DirectionPrior
from noveld.models.dpmm import (
    DPMM,
    DPMMConfig,
    advance_documents,
    apply_additions,
    decay_factor,
    ensure_clusters,
)
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels import vmf as vkern
from noveld.models.kernels import vmf_table as vtable
from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import DIMENSION_PREFIX

#: member embeddings kept by the novelty tracker are integers: x_j · 2^20
FEATURE_SCALE = float(1 << 20)


def dimension_tokens(j: int) -> tuple[str, str]:
    """The reserved vocabulary entries holding the positive and negative parts of dimension j."""
    return f"{DIMENSION_PREFIX}{j}+", f"{DIMENSION_PREFIX}{j}-"


@dataclass(frozen=True)
class VMFConfig(DPMMConfig):
    """``dpmm`` with the vMF likelihood: the DP mixture's settings plus the embedding dimension
    and the typical cosine between a member and its cluster's mean direction (sets κ)."""

    dimension: int = 0
    #: the typical cosine; None: learned from the clusters at each batch
    #: (:meth:`VMFMixture.learn_concentration`), starting from :attr:`prior_cosine`
    cosine: float | None = 0.5
    merge: bool = False  # merges and burst splits are multinomial moves (not for vMF yet)
    split: bool = False
    #: the base measure on a cluster's mean direction: a vMF around the stream's mean direction
    #: fitted to the stream (:class:`~noveld.models.direction_prior.DirectionPrior`), else the
    #: uniform density
    direction_prior: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.dimension < 2:
            raise ValueError("the vmf likelihood needs the embedding dimension (>= 2)")
        if self.cosine is not None and not 0.0 < self.cosine < 1.0:
            raise ValueError("the typical cosine must be in (0, 1)")

    @property
    def prior_cosine(self) -> float:
        """The typical cosine a learned κ starts from (the likelihood's default cosine)."""
        return 0.5

    @property
    def kappa(self) -> float:
        """κ of the configured typical cosine (paper 003 eq. 10; learned: of the prior's)."""
        return self.kappa_at(self.prior_cosine if self.cosine is None else self.cosine)

    def kappa_at(self, cosine: float) -> float:
        """κ of a typical cosine (paper 003 eq. 10)."""
        return vkern.kappa_from_cosine(cosine, self.dimension)


class _MemberFeatures(Sequence[tuple[np.ndarray, np.ndarray]]):
    """Each document's embedding as (dimension indices, integer values x_j · 2^20), the form
    the novelty tracker keeps for re-founding."""

    def __init__(self, emb: np.ndarray) -> None:
        self._emb = emb

    def __len__(self) -> int:
        return int(self._emb.shape[0])

    def __getitem__(self, i: int) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[override]
        x = self._emb[i]
        return np.arange(x.shape[0], dtype=np.int64), np.rint(x * FEATURE_SCALE).astype(np.int64)


class VMFMixture(DPMM):
    """CRP seating of embeddings under the collapsed vMF likelihood, with Gibbs rejuvenation of
    the batch, forgetting, retirement and known labels as in :class:`DPMM`."""

    kind = "dpmm"
    likelihood = "vmf"
    config: VMFConfig

    def __init__(self, config: VMFConfig) -> None:
        super().__init__(config)
        self._pos: np.ndarray | None = None
        self._neg: np.ndarray | None = None
        #: the typical cosine in use: the configured one, or the one learned from the
        #: statistics last given (:meth:`learn_concentration`)
        self.cosine = config.prior_cosine if config.cosine is None else config.cosine

    @property
    def kappa(self) -> float:
        """The shared concentration κ of the typical cosine in use (paper 003 eq. 10)."""
        return self.config.kappa_at(self.cosine)

    def learn_concentration(self, stats: MultinomialStats) -> float:
        """The typical cosine in use, learned from the live clusters' masses and resultants
        (:func:`~noveld.models.concentration.learned_cosine`) unless it is configured: a pure
        function of the statistics, so a replica or a replay computes the same."""
        if self.config.cosine is None:
            kmax = stats.kmax
            mass = np.where(stats.alive[:kmax], stats.m[:kmax] * stats.scale, 0.0)
            self.cosine = learned_cosine(self.resultants(stats), mass, self.config.prior_cosine)
        return self.cosine

    def direction_prior(
        self, r: np.ndarray, mass: np.ndarray, emb: np.ndarray | None = None
    ) -> DirectionPrior:
        """The base measure on a cluster's mean direction: fitted to the live clusters
        (resultants ``r``, rows of positive ``mass``; :meth:`DirectionPrior.of_clusters`, with
        the batch's vectors ``emb`` while there is one cluster), or the uniform one when
        ``config.direction_prior`` is off."""
        if not self.config.direction_prior:
            return DirectionPrior(None)
        return DirectionPrior.of_clusters(r, mass, emb, self.config.prior_cosine)

    def bind_dimension_words(self, pos_ids: list[int], neg_ids: list[int]) -> None:
        """Vocabulary ids of the reserved entries of :func:`dimension_tokens` (j < dimension)."""
        p = self.config.dimension
        if len(pos_ids) != p or len(neg_ids) != p:
            raise ValueError(f"vmf: expected {p} ids per sign")
        self._pos = np.asarray(pos_ids, dtype=np.int64)
        self._neg = np.asarray(neg_ids, dtype=np.int64)

    def dimension_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """The reserved ids of each dimension's positive and negative part."""
        return self._dimension_ids()

    def _dimension_ids(self) -> tuple[np.ndarray, np.ndarray]:
        if self._pos is None or self._neg is None:
            raise RuntimeError("vmf: bind_dimension_words must be called before partial_fit")
        return self._pos, self._neg

    def resultants(self, stats: MultinomialStats, extra_decay: float = 1.0) -> np.ndarray:
        """Dense (kmax × p) resultants in true units (rows of dead slots are meaningless)."""
        pos, neg = self._dimension_ids()
        kmax = stats.kmax
        out = np.zeros((kmax, self.config.dimension))
        vkern.gather_resultants(
            pos, neg, stats.head, stats.nxt, stats.pk, stats.pc, kmax,
            stats.scale * extra_decay, out,
        )  # fmt: skip
        return out

    def partial_fit(
        self,
        batch: DocBatch,
        stats: MultinomialStats,
        rng: np.random.Generator,
        known: np.ndarray | None = None,
        pinned: Collection[int] = (),
    ) -> BatchResult:
        """Seat a batch of embeddings, rejuvenate it, forget, retire; the step is applied through
        :func:`apply_additions` (the code replicas use), so the writer equals any replay."""
        cfg = self.config
        emb = batch.emb
        if emb is None or emb.shape != (len(batch), cfg.dimension):
            raise ValueError(f"vmf: the batch needs a ({len(batch)}, {cfg.dimension}) embedding")
        pos, neg = self._dimension_ids()
        nb = len(batch)
        self.learn_concentration(stats)
        forced = ensure_clusters(stats, known, nb)
        self._pinned = pinned
        stats.fresh[:] = False
        f = decay_factor(cfg.half_life_docs, nb)
        kmax = stats.kmax
        mass = np.zeros(kmax + nb)
        mass[:kmax] = np.where(stats.alive[:kmax], stats.m[:kmax] * stats.scale * f, 0.0)
        r_old = self.resultants(stats, f)
        prior = self.direction_prior(r_old, mass[:kmax], emb)
        r_old = prior.resultants(r_old, mass[:kmax])
        prior_rn2, prior_dots = prior.new_slot(emb)
        rn2 = np.zeros(kmax + nb)
        rn2[:kmax] = np.einsum("kj,kj->k", r_old, r_old)
        dots = np.zeros((nb, kmax + nb))
        dots[:, :kmax] = emb @ r_old.T
        gram = emb @ emb.T
        sweeps = cfg.rejuvenation_sweeps
        uniforms = rng.random(nb * (1 + sweeps))
        assign = np.empty(nb, dtype=np.int64)
        log_norm = np.empty(nb)
        margin = np.empty(nb)
        vkern.seat_batch(
            gram, dots, mass, rn2, kmax, cfg.dimension, self.kappa, cfg.discount,
            self.log_alpha(nb), cfg.deterministic, uniforms, sweeps, forced, assign, log_norm,
            margin, prior_rn2, prior_dots,
        )  # fmt: skip
        # new slots become uids in order of their first document
        next_uid = int(stats.ictl[kern.NEXT_UID])
        uid_of: dict[int, int] = {}
        born: list[tuple[int, int, float]] = []
        for d, k in enumerate(assign.tolist()):
            if k >= kmax and k not in uid_of:
                uid_of[k] = next_uid + len(uid_of)
                born.append((uid_of[k], d, float(min(margin[d], kern.MARGIN_CAP))))
        uids = np.array(
            [uid_of[k] if k >= kmax else int(stats.uid[k]) for k in assign.tolist()],
            dtype=np.int64,
        )
        delta = self._embedding_delta(batch, uids, pos, neg, f, born, stats)
        apply_additions(stats, delta)
        slot_of = {int(u): k for k, u in enumerate(stats.uid[: stats.kmax].tolist())}
        for u, _, _ in born:
            stats.fresh[slot_of[u]] = True
        retired = self._retire(stats)
        advance_documents(stats, nb, cfg.half_life_docs, cfg.prune_below, self.uncounted_words)
        delta = replace(
            delta, retired_uids=np.array([u for u, _, _ in retired], dtype=np.int64), n_docs=nb
        )
        return BatchResult(uids, born, retired, delta, float("nan"))

    @staticmethod
    def _embedding_delta(
        batch: DocBatch,
        uids: np.ndarray,
        pos: np.ndarray,
        neg: np.ndarray,
        f: float,
        born: list[tuple[int, int, float]],
        stats: MultinomialStats,
    ) -> StatsDelta:
        """The batch as count additions: each document's text words (for top terms) and the
        positive and negative parts of its embedding on the dimensions' reserved entries."""
        emb = batch.emb
        assert emb is not None
        nb, p = emb.shape
        # the embeddings summed per cluster first: 2p entries per cluster, not per document
        cl, inv = np.unique(uids, return_inverse=True)
        onehot = np.zeros((cl.shape[0], nb))
        onehot[inv, np.arange(nb)] = 1.0
        parts = np.concatenate([onehot @ np.maximum(emb, 0.0), onehot @ np.maximum(-emb, 0.0)], 1)
        dim_uids = np.repeat(cl, 2 * p)
        dim_words = np.tile(np.concatenate([pos, neg]), cl.shape[0])
        dim_counts = parts.ravel()
        nonzero = dim_counts > 0.0
        word_uids = np.repeat(uids, np.diff(batch.ptr))
        return DPMM._delta_from_entries(
            batch,
            uids,
            np.ones(nb),
            batch.lengths.astype(np.float64),
            np.concatenate([word_uids, dim_uids[nonzero]]),
            np.concatenate([batch.words, dim_words[nonzero]]),
            np.concatenate([batch.counts.astype(np.float64), dim_counts[nonzero]]),
            f,
            born,
            [],
            [],
            stats,
        )

    def member_features(self, batch: DocBatch) -> Sequence[tuple[np.ndarray, np.ndarray]]:
        """What the novelty tracker keeps of a member for re-founding: its embedding."""
        assert batch.emb is not None
        return _MemberFeatures(batch.emb)

    def term_weights(self, stats: MultinomialStats, uid: int) -> tuple[np.ndarray, np.ndarray]:
        """The cluster's text-word counts (the dimensions' reserved entries left out)."""
        ws, cs = super().term_weights(stats, uid)
        pos, neg = self._dimension_ids()
        keep = ~np.isin(ws, np.concatenate([pos, neg]))
        return ws[keep], cs[keep]

    def refound_test(self, stats: MultinomialStats, batch: DocBatch) -> FitTest:
        """:meth:`still_belongs` on the live statistics; the resultants are gathered once, at
        the first question of the batch."""
        size = len(batch)
        cache: list[tuple[np.ndarray, DirectionPrior]] = []

        def fits(uid: int, dims: np.ndarray, values: np.ndarray) -> bool:
            if not cache:
                r = self.resultants(stats)
                cache.append((r, self.direction_prior(r, self._live_mass(stats))))
                self.learn_concentration(stats)
            x = np.zeros(self.config.dimension)
            x[dims] = values / FEATURE_SCALE
            r, prior = cache[0]
            return self.still_belongs_embedding(x, uid, stats, r, size, prior)

        return fits

    def still_belongs_embedding(
        self,
        x: np.ndarray,
        uid: int,
        stats: MultinomialStats,
        resultants: np.ndarray,
        batch_size: int = 1,
        prior: DirectionPrior | None = None,
    ) -> bool:
        """Would member x of cluster ``uid`` be seated there again, taken out of it (one MAP
        collapsed Gibbs step under the vMF predictive)? Read-only. ``prior``: the base measure
        (None: :meth:`direction_prior` of the statistics)."""
        k = stats.slot_of(uid)
        if k < 0:
            return False
        mass = self._live_mass(stats)
        if mass[k] - 1.0 <= 0.0:
            return True  # its only member
        if prior is None:
            prior = self.direction_prior(resultants, mass)
        r = resultants.copy()
        r[k] -= x
        mass[k] -= 1.0
        scores, lp_new = self.scores(x, mass, r, batch_size, prior)
        best = int(np.argmax(scores))
        return bool(scores[k] > lp_new and scores[k] >= scores[best])

    def scores(
        self,
        x: np.ndarray,
        mass: np.ndarray,
        resultants: np.ndarray,
        batch_size: int,
        prior: DirectionPrior | None = None,
    ) -> tuple[np.ndarray, float]:
        """Log seating weights of unit vector x into clusters (mass, resultants) and the
        new-cluster weight under the base measure ``prior`` (None: uniform), whose
        pseudo-resultant a·μ₀ every live cluster carries and an empty one is (numpy; the
        kernel's formula, for checks and read-only questions)."""
        cfg = self.config
        p, kappa = cfg.dimension, self.kappa
        logc = vkern.log_vmf_normalizer
        live = mass > 0.0
        out = np.full(mass.shape[0], -np.inf)
        c_kappa = logc(p, kappa)
        pseudo = None if prior is None else prior.pseudo
        idx = np.flatnonzero(live)
        r = resultants[idx] if pseudo is None else resultants[idx] + pseudo
        rx = r + x
        norms = np.sqrt(
            np.concatenate([np.einsum("kj,kj->k", r, r), np.einsum("kj,kj->k", rx, rx)])
        )
        logc_r = vtable.log_normalizers(p, kappa * norms)
        n = idx.shape[0]
        out[idx] = (
            np.log(np.maximum(mass[idx] - cfg.discount, 1e-3)) + c_kappa + logc_r[:n] - logc_r[n:]
        )
        n_live = int(live.sum())
        if pseudo is None:
            log_new = vkern.log_sphere_density_at_zero(p)
        else:
            a = float(np.linalg.norm(pseudo))
            log_new = (
                c_kappa + logc(p, kappa * a) - logc(p, kappa * float(np.linalg.norm(pseudo + x)))
            )
        lp_new = math.log(math.exp(self.log_alpha(batch_size)) + cfg.discount * n_live) + log_new
        return out, lp_new

    @staticmethod
    def _live_mass(stats: MultinomialStats) -> np.ndarray:
        """Each slot's mass in true units (0 for dead slots)."""
        kmax = stats.kmax
        return np.where(stats.alive[:kmax], stats.m[:kmax] * stats.scale, 0.0)
