"""Length tempering of a document's words predictive: how many independent words a document
of n tokens is worth to the seating."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def length_tempering(lengths: np.ndarray, concentration: float) -> np.ndarray:
    """τ_i = (1 + s) / (n_i + s): the power on document i's words predictive, n_i its tokens,
    s the ``concentration`` (0: τ = 1, untempered). A document drawn as a Pólya urn of
    concentration s around its story's word distribution carries the information of
    n(1 + s)/(n + s) independent words (its counts' variance is (n + s)/(1 + s) times the
    multinomial's), so its words count that much: about n for a headline, at most 1 + s
    for a long article."""
    out = np.ones(lengths.shape[0])
    if concentration > 0.0:
        for i in range(lengths.shape[0]):
            out[i] = document_tempering(lengths[i], concentration)
    return out


@njit(cache=True, inline="always")
def document_tempering(length: float, concentration: float) -> float:
    """τ of one document of ``length`` tokens (:func:`length_tempering`'s entry; 1 at s = 0)."""
    if concentration <= 0.0:
        return 1.0
    return min(1.0, (1.0 + concentration) / (max(length, 1.0) + concentration))
