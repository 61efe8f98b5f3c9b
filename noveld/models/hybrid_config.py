"""The hybrid model's settings: the vmf ones plus the vector view's weight, its centring and the
words' length tempering."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from noveld.models.kernels.tempering import length_tempering
from noveld.models.vmf import VMFConfig

#: how many independent dimensions the vector view counts as (the default view weight is
#: this over the vector's dimension, at most 1): measured best on news / news-t at p = 64,
#: 128 and 256 alike (``benchmarks/quality_hybrid.py``)
EFFECTIVE_DIMENSION = 64

#: the typical member-to-mean cosine of the hybrid's vectors (its κ), from which a learned κ and
#: the direction prior's ρ start
PRIOR_COSINE = 0.4


def view_weight(dimension: int, configured: float | None) -> float:
    """w, the vMF factor's exponent: the configured one, else :data:`EFFECTIVE_DIMENSION` / p
    at most 1."""
    if configured is not None:
        return configured
    return min(1.0, EFFECTIVE_DIMENSION / dimension)


@dataclass(frozen=True)
class HybridConfig(VMFConfig):
    """``dpmm`` with both likelihoods: the vmf settings (dimension, typical cosine → κ) plus
    the weight w of the vector view against the words (None: :data:`EFFECTIVE_DIMENSION` / p,
    at most 1). ``direction_prior`` (the vectors' base measure) is the vmf one, replaced by
    ``centre``."""

    cosine: float | None = 0.4
    view_weight: float | None = None
    #: score the vectors around the stream's mean vector
    #: (:class:`~noveld.models.hybrid_batch.Centring`)
    centre: bool = False
    #: s of the words' length tempering (:func:`~noveld.models.kernels.tempering.
    #: length_tempering`): a document of n tokens counts as n(1 + s)/(n + s) words; 0: as n
    document_concentration: float = 15.0

    @property
    def prior_cosine(self) -> float:
        """The typical cosine a learned κ starts from (the hybrid's default cosine)."""
        return PRIOR_COSINE

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.view_weight is not None and not self.view_weight >= 0.0:
            raise ValueError("the view weight must be >= 0")
        if not self.document_concentration >= 0.0:
            raise ValueError("the document concentration must be >= 0 (0: no tempering)")

    def tempering(self, lengths: np.ndarray) -> np.ndarray:
        """τ of each document (token counts ``lengths``): the power on its words predictive."""
        return length_tempering(lengths.astype(np.float64), self.document_concentration)

    @property
    def weight(self) -> float:
        """w: the vMF factor's exponent. Tempering it by d/p makes the tempered exponent
        w·κ_p(ρ) ≈ κ_d(ρ): the vector counts as a d-dimensional one with the same typical
        cosine, whatever dimension it is written in."""
        return view_weight(self.dimension, self.view_weight)
