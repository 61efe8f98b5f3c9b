"""The hybrid's vector frame: its vectors scored raw under the fitted prior on a cluster's mean
direction (:class:`~noveld.models.direction_prior.DirectionPrior`, the default) or around the
stream's mean (:class:`~noveld.models.hybrid_batch.Centring`, opt-in)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noveld.models.direction_prior import DirectionPrior
from noveld.models.hybrid_batch import Centring
from noveld.models.suffstats import MultinomialStats


@dataclass(frozen=True)
class VectorFrame:
    """How the vectors are scored: around the stream's mean (:class:`Centring`, opt-in), or
    raw under the fitted :class:`DirectionPrior` (the default); ``resultants``: the live
    clusters' resultants as the scores read them."""

    resultants: np.ndarray
    centring: Centring
    prior: DirectionPrior

    @classmethod
    def of(
        cls,
        stats: MultinomialStats,
        r: np.ndarray,
        centre: bool,
        prior_cosine: float | None,
        f: float = 1.0,
        emb: np.ndarray | None = None,
    ) -> VectorFrame:
        """The frame of the statistics (resultants ``r``, decayed by ``f`` more, as the masses
        are here) and the batch's vectors ``emb``, if any; ``prior_cosine`` None: the uniform
        prior."""
        kmax = stats.kmax
        mass = np.where(stats.alive[:kmax], stats.m[:kmax] * stats.scale * f, 0.0)
        if centre:
            c = Centring.of(r, mass, emb)
            return cls(c.resultants(r, mass), c, DirectionPrior(None))
        if prior_cosine is None:
            return cls(r, Centring(None), DirectionPrior(None))
        prior = DirectionPrior.of_clusters(r, mass, emb, prior_cosine, documents_first=True)
        return cls(prior.resultants(r, mass), Centring(None), prior)

    def vectors(self, emb: np.ndarray) -> np.ndarray:
        """The unit vectors as scored (centred and unit again, or as they are)."""
        return self.centring.vectors(emb)
