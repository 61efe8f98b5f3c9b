"""The ``hdp`` model's vector view: each category's resultant of its documents' unit vectors,
stored as the dpmm hybrid stores a cluster's (two reserved entries per dimension,
:func:`~noveld.models.vmf.dimension_tokens`) plus a reserved entry counting the vectors, and
the sampler's bundle of them (:mod:`noveld.models.kernels.hdp_sampler.vectors`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noveld.models.direction_prior import DirectionPrior
from noveld.models.hybrid_batch import vector_merge_gains
from noveld.models.hybrid_config import PRIOR_COSINE, view_weight
from noveld.models.kernels import vmf as vkern
from noveld.models.kernels import vmf_table as vtable
from noveld.models.suffstats import MultinomialStats
from noveld.models.vmf import FEATURE_SCALE
from noveld.models.vocabulary import DIMENSION_PREFIX

#: the reserved entry holding a category's number of vectors
VECTOR_COUNT_TOKEN = f"{DIMENSION_PREFIX}n"


def unit_rows(emb: np.ndarray) -> np.ndarray:
    """The rows made unit vectors (zero rows stay zero: no vector)."""
    norm = np.linalg.norm(emb, axis=1, keepdims=True)
    out: np.ndarray = np.divide(emb, norm, out=np.zeros_like(emb), where=norm > 0.0)
    return out


@dataclass(frozen=True)
class CategoryVectors:
    """The reserved ids of the view (``pos``/``neg``: each dimension's parts; ``count``: the
    vectors' number) and its constants: κ from the typical cosine (paper 003 eq. 10), the view
    weight w, and whether the base measure is the fitted :class:`DirectionPrior`."""

    pos: np.ndarray
    neg: np.ndarray
    count: int
    kappa: float
    weight: float
    direction_prior: bool = True

    @property
    def dimension(self) -> int:
        """p."""
        return int(self.pos.shape[0])

    def ids(self) -> np.ndarray:
        """Every reserved id of the view."""
        return np.concatenate([self.pos, self.neg, [self.count]]).astype(np.int64)

    def resultants(self, stats: MultinomialStats, scale: float) -> tuple[np.ndarray, np.ndarray]:
        """Per slot (< kmax): the resultant (kmax × p) and the number of vectors, in true
        units at ``scale``."""
        kmax = stats.kmax
        r = np.zeros((kmax, self.dimension))
        vkern.gather_resultants(self.pos, self.neg, stats.head, stats.nxt, stats.pk, stats.pc,
                                kmax, scale, r)  # fmt: skip
        n = np.zeros((kmax, 1))
        one = np.array([self.count], dtype=np.int64)
        vkern.gather_resultants(one, np.array([stats.head.shape[0]], dtype=np.int64),
                                stats.head, stats.nxt, stats.pk, stats.pc, kmax, scale,
                                n)  # fmt: skip
        return r, n[:, 0]

    def prior(self, r: np.ndarray, n: np.ndarray, emb: np.ndarray | None) -> DirectionPrior:
        """The base measure on a category's mean direction, fitted to the categories' mean
        vectors, each once (the batch's documents before there is a category; the uniform one
        when ``direction_prior`` is off)."""
        if not self.direction_prior:
            return DirectionPrior(None)
        return DirectionPrior.of_clusters(r, n, emb, PRIOR_COSINE, documents_first=True)

    def merge_gains(
        self, stats: MultinomialStats, cats: np.ndarray, rows: np.ndarray
    ) -> np.ndarray:
        """``w ×`` the vectors' log marginal ratio of category slots ``cats[rows[i]]`` and
        ``cats[j]`` together over apart (:func:`~noveld.models.hybrid_batch.vector_merge_gains`,
        under the fitted direction prior): the vector view's part of a merge test on
        categories."""
        r, n = self.resultants(stats, stats.scale)
        prior = self.prior(r, n, None)
        rc = r[cats] if prior.pseudo is None else r[cats] + prior.pseudo
        gains = vector_merge_gains(rc, rows, self.dimension, self.kappa, prior.pseudo)
        return self.weight * gains

    def bundle(
        self,
        stats: MultinomialStats,
        scale: float,
        cat_of_slot: np.ndarray,
        cap: int,
        emb: np.ndarray | None,
        n_docs: int,
    ) -> tuple[np.ndarray, ...]:
        """The sampler's vector bundle (``cx[6:]``): the batch's unit vectors X, their dots with
        each local category's ``R = r + a·μ₀`` (rows not opened and the last, the new
        category's: a·μ₀), ``‖R‖²``, ``log C_p(κ‖R‖)``, (κ, w, log C_p(κ)), the normaliser
        table, which documents have a vector, and X·Xᵀ."""
        p = self.dimension
        if emb is not None and emb.shape != (n_docs, p):
            raise ValueError(f"hdp: the batch's vectors must be ({n_docs}, {p})")
        x = np.zeros((n_docs, p)) if emb is None else unit_rows(np.asarray(emb, np.float64))
        has = (np.abs(x).sum(axis=1) > 0.0).astype(np.int8)
        r, n = self.resultants(stats, scale)
        prior = self.prior(r, n, x[has > 0])
        pseudo = np.zeros(p) if prior.pseudo is None else prior.pseudo
        live = np.flatnonzero(cat_of_slot >= 0)
        n_live = int(cat_of_slot[live].max()) + 1 if live.shape[0] else 0
        res = np.empty((n_live, p))  # the rows of existing categories; the others are a·μ₀
        res[:] = pseudo
        res[cat_of_slot[live]] += r[live]
        rn2 = np.full(cap + 1, float(pseudo @ pseudo))
        rn2[:n_live] = np.einsum("kj,kj->k", res, res)
        table = vtable.normalizer_table(p, self.kappa)
        logc = vtable.log_normalizers_sq(rn2, table, p, self.kappa)
        par = np.array([self.kappa, self.weight, vkern.log_vmf_normalizer(p, self.kappa)])
        dots = np.empty((n_docs, cap + 1))
        dots[:, :n_live] = x @ res.T
        dots[:, n_live:] = (x @ pseudo)[:, None]
        return x, dots, rn2, logc, par, table, has, x @ x.T

    def entries(self, emb: np.ndarray | None, uids: np.ndarray) -> tuple[np.ndarray, ...]:
        """The count additions of the batch's vectors, each to the category ``uids[d]`` that
        carries document d's context: (uids, reserved ids, counts), multiples of 2^-20
        (:data:`~noveld.models.vmf.FEATURE_SCALE`)."""
        none = np.zeros(0, dtype=np.int64)
        if emb is None:
            return none, none, np.zeros(0)
        x = unit_rows(np.asarray(emb, np.float64))
        has = np.abs(x).sum(axis=1) > 0.0
        x, uids = x[has], uids[has]
        cats, inv = np.unique(uids, return_inverse=True)
        per = np.zeros((cats.shape[0], x.shape[1]))
        np.add.at(per, inv, x)
        n = np.bincount(inv, minlength=cats.shape[0]).astype(np.float64)
        vals = np.concatenate([np.maximum(per, 0.0), np.maximum(-per, 0.0), n[:, None]], 1)
        # on the 2^-20 grid: sums of these are exact, so replicas adding the same deltas in
        # another order hold bit-identical resultants
        vals = np.rint(vals * FEATURE_SCALE) / FEATURE_SCALE
        words = np.tile(self.ids(), cats.shape[0])
        e_uids = np.repeat(cats, vals.shape[1])
        flat = vals.ravel()
        keep = flat > 0.0
        return e_uids[keep].astype(np.int64), words[keep], flat[keep]


def category_vectors(
    dimension: int,
    cosine: float,
    configured_weight: float | None,
    direction_prior: bool,
    pos_ids: list[int],
    neg_ids: list[int],
    count_id: int,
) -> CategoryVectors:
    """The view of p = ``dimension`` with its reserved ids bound (:func:`dimension_tokens` for
    j < p, then :data:`VECTOR_COUNT_TOKEN`)."""
    if len(pos_ids) != dimension or len(neg_ids) != dimension:
        raise ValueError(f"hdp: expected {dimension} dimension ids per sign")
    if not 0.0 < cosine < 1.0:
        raise ValueError("the typical cosine must be in (0, 1)")
    return CategoryVectors(
        np.asarray(pos_ids, dtype=np.int64),
        np.asarray(neg_ids, dtype=np.int64),
        int(count_id),
        vkern.kappa_from_cosine(cosine, dimension),
        view_weight(dimension, configured_weight),
        direction_prior,
    )


def no_vector_bundle(cap: int, n_docs: int) -> tuple[np.ndarray, ...]:
    """The vector bundle of a model without the view (nothing to score)."""
    return (
        np.zeros((n_docs, 0)), np.zeros((0, 0)), np.zeros(cap + 1), np.zeros(cap + 1),
        np.zeros(3), np.zeros((1, 9)), np.zeros(n_docs, dtype=np.int8), np.zeros((0, 0)),
    )  # fmt: skip
