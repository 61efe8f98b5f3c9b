"""Hyperparameters of the ``hdp`` model."""

from __future__ import annotations

from dataclasses import dataclass

from noveld.models.dpmm.config import DPMMConfig


@dataclass(frozen=True)
class HDPConfig:
    """Hyperparameters (all in the model fingerprint): L topics, Dirichlet priors β (topic–word)
    and ζ (category–topic), the per-document table concentration α and the category
    concentration γ (starting values when they are resampled), the blocked k-step, Gibbs sweeps
    per batch, forgetting and retirement as in ``dpmm``.

    Short texts want many topics and a small ζ: a category then keeps to a few topics of its
    own (one per story, for news), and L should exceed the number of live categories by a
    margin (a new category claims an unused topic), with L·ζ = 1 (docs/model.md, "hdp")."""

    topics: int = 2000
    beta: float = 0.01
    zeta: float = 5e-4  # L·ζ = 1: unused topics weigh one token's worth in a category
    context_prior: float = 0.1  # η of each category's Dirichlet–categorical context fields
    table_alpha: float = 1.0
    gamma: float = 10.0
    discount: float = 0.5  # Pitman–Yor discount of the category level (0: the DP of paper 000)
    resample_concentrations: bool = True
    blocked: bool = True
    split: bool = True
    merge: bool = True
    absorb_margin: float = 20.0  # log-odds a category needs to be merged into a known one
    #: log steps of the namespace (batches of any writer) a birth stays a merge candidate for
    #: other writers' births (replicas; 0: none)
    young_steps: int = DPMMConfig.young_steps
    sweeps: int = 2
    deterministic: bool = True
    half_life_docs: float = 0.0
    retire_min_mass: float = 0.05
    max_active_clusters: int = 5000
    prune_below: float = DPMMConfig.prune_below
    #: s of the length tempering of a table's words in its category choice (0: none)
    document_concentration: float = 0.0
    #: p of the documents' vectors (0: words only; else a vMF term per category,
    #: :mod:`noveld.models.hdp.vectors`)
    dimension: int = 0
    #: the vectors' typical member-to-mean cosine (sets κ by paper 003 eq. 10)
    cosine: float = 0.4
    #: w, the vMF term's exponent (None: 64/p, at most 1, as the dpmm hybrid's)
    view_weight: float | None = None
    #: the vectors' base measure: the fitted prior on a category's mean direction
    #: (:class:`~noveld.models.hybrid_prior.DirectionPrior`), else the uniform density
    direction_prior: bool = True
