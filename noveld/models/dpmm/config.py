"""Hyperparameters of the streaming DP mixture and the forgetting schedule they imply."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

AlphaScaling = Literal["none", "batch"]


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
    # log steps (batches of any writer) during which a birth stays a merge candidate for later
    # births of the same story, this writer's or another's (replicas reconciling concurrent
    # births: noveld.models.lineage); 0 = only births of one batch merge
    young_steps: int = 24
    #: s of the words' length tempering (:func:`~noveld.models.kernels.tempering.
    #: length_tempering`): a document of n tokens counts as n(1 + s)/(n + s) words; 0: as n
    document_concentration: float = 0.0

    def __post_init__(self) -> None:
        if self.alpha <= 0 or self.beta <= 0:
            raise ValueError("alpha and beta must be positive")
        if self.rejuvenation_sweeps < 0:
            raise ValueError("rejuvenation_sweeps must be >= 0")
        if self.half_life_docs < 0:
            raise ValueError("half_life_docs must be >= 0 (0 = no forgetting)")
        if self.young_steps < 0:
            raise ValueError("young_steps must be >= 0")
        if self.max_active_clusters < 1:
            raise ValueError("max_active_clusters must be >= 1")
        if not self.document_concentration >= 0.0:
            raise ValueError("the document concentration must be >= 0 (0: no tempering)")


def decay_factor(half_life_docs: float, n_docs: int) -> float:
    """Multiplier after ``n_docs`` documents for a half-life in documents (0 = no decay)."""
    if half_life_docs <= 0:
        return 1.0
    return float(2.0 ** (-n_docs / half_life_docs))
