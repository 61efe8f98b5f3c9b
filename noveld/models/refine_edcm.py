"""Offline refinement of a streaming EDCM partition (``noveld fit --likelihood edcm``).

Paper 002 fits a finite EDCM mixture by expectation propagation: one site per document
(Section 3.3), a cavity that removes the document's site from the posterior (eq. 6), a tilted
distribution that puts it back through the EDCM likelihood of eq. 2, normalised by eq. 7, and a
moment-matching projection (eqs. 8–12), iterated over the documents to a fixed point. Its
Gaussian sites on β_j carry a V×V precision per cluster per document and its Z_i a Monte Carlo
integral over them — out of reach at V in the tens of thousands. This refinement keeps the
site-by-site structure with the EDCM posterior collapsed to its mode: the cavity is the
cluster's statistics without the document, with the shape ``s_k`` and ``β_k`` re-solved (the
smoothed fixed point of :mod:`noveld.models.kernels.edcm`); the tilted distribution over the
document's cluster is eq. 7's mixture with π's Dirichlet replaced by the CRP of ``dpmm`` (the
number of clusters is not fixed); the projection is onto one cluster (MAP when
``deterministic``, else a draw). Pure: arrays in, a partition out.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.edcm import EDCMMixture
from noveld.models.edcm_prior import Prior
from noveld.models.kernels import edcm as ekern
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels.edcm_refine import reseat_edcm
from noveld.models.refine import Refinement, partition_key, partition_stats
from noveld.models.suffstats import MultinomialStats

_BIN_LENGTHS = ekern.bin_lengths()


def _shapes(
    model: EDCMMixture, stats: MultinomialStats, prior: Prior
) -> tuple[np.ndarray, np.ndarray]:
    """Every slot's length histogram and solved shape row under ``prior`` (rows for the whole
    capacity, so clusters opened by the sweep have theirs)."""
    cap = stats.m.shape[0]
    hist = np.zeros((cap, ekern.N_BINS))
    ekern.gather_histograms(model._bin_ids(), stats.head, stats.nxt, stats.pk, stats.pc, hist)
    shape = np.zeros((cap, ekern.SHAPE_COLUMNS))
    ekern.solve_shapes(
        hist, _BIN_LENGTHS, stats.m, stats.ntok, stats.alive, stats.kmax, stats.scale,
        prior.docs, prior.total, model.config.discount, shape,
    )  # fmt: skip
    return hist, shape


def refine_edcm_partition(
    model: EDCMMixture,
    batch: DocBatch,
    uids: np.ndarray,
    log_alpha: float,
    sweeps: int,
    fixed: np.ndarray,
    next_uid: int,
    rng: np.random.Generator,
    on_sweep: Callable[[int, int, int], None] | None = None,
) -> Refinement:
    """``sweeps`` site-by-site sweeps (module docstring) over every document of ``batch``
    (word counts; the EDCM view is built here), started from ``uids``. The prior over shapes
    is that of the whole archive, fixed for the refinement. ``log_alpha``, ``fixed``,
    ``next_uid`` and ``on_sweep(i, moved, clusters)`` as in
    :func:`~noveld.models.refine.refine_partition`. MAP sweeps stop at a fixed point or when they
    come back to a partition they left: β is a point estimate re-solved as documents move, not
    integrated out, so MAP moves need not raise a joint and can cycle."""
    cfg = model.config
    view, bins_of = model.edcm_view(batch)
    stats, slots = partition_stats(view, uids, next_uid)
    stats.fresh[: stats.kmax] = True  # every cluster may empty and go
    prior = model.shapes(stats, batch.n_words).prior
    if prior.slope > 0.0:
        doc_cb = prior.docs * prior.of(model.document_frequencies(stats, view.words))
    else:
        doc_cb = np.full(view.nnz, prior.docs * prior.const)
    moved = np.zeros(1, dtype=np.int64)
    per_sweep: list[int] = []
    seen = {partition_key(slots)}
    for i in range(sweeps):
        stats.reserve(len(batch), view.nnz, view.vocab_size)  # room for one sweep
        hist, shape = _shapes(model, stats, prior)
        lp = np.empty(stats.m.shape[0])
        reseat_edcm(
            view.ptr, view.words, view.counts, view.lengths, batch.lengths, bins_of, slots,
            fixed, rng.random(len(batch)), 1, log_alpha, prior.docs, doc_cb, prior.total,
            cfg.deterministic, stats.scale, cfg.discount, stats.m, stats.ntok, stats.alive,
            stats.fresh, stats.uid, stats.head, stats.nxt, stats.pk, stats.pc, stats.free_stack,
            stats.ictl, hist, _BIN_LENGTHS, shape, lp, moved,
        )  # fmt: skip
        per_sweep.append(int(moved[0]))
        if on_sweep is not None:
            on_sweep(i, per_sweep[-1], int(stats.alive[: stats.kmax].sum()))
        key = partition_key(slots)
        if cfg.deterministic and (per_sweep[-1] == 0 or key in seen):
            break  # a fixed point, or back to a partition left before: the next would repeat
        seen.add(key)
    return Refinement(
        uids=stats.uid[slots].copy(),
        moved=per_sweep,
        next_uid=int(stats.ictl[kern.NEXT_UID]),
    )
