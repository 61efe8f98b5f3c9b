"""The ``model`` section: which inference engine, which likelihood, and their hyperparameters;
the combinations no engine can run are refused here."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ModelWrapValidatorHandler, model_validator

from noveld.daemon.model_kinds import refusal
from noveld.daemon.settings_sections import Section


class ModelSettings(Section):
    """Which model and its hyperparameters."""

    kind: Literal["dpmm", "svi", "hdp"] = Field("dpmm", description="inference engine")
    likelihood: Literal["multinomial", "edcm", "vmf", "hybrid"] = Field(
        "hybrid",
        description=(
            "dpmm: hybrid (words and vectors; the default), multinomial (words), edcm (which "
            "words: long, bursty documents) or vmf (the documents' vectors); svi: multinomial; "
            "hdp: hybrid (a vMF term per category beside the words; the default) or "
            "multinomial (words)"
        ),
    )
    featurizer: Literal["words", "semantic", "hybrid"] = Field(
        "hybrid",
        description=(
            "words (tokens), semantic (a unit vector per document from its text, by the "
            "built-in encoder) or hybrid (both); unset, the one the likelihood reads, with the "
            "documents' own embeddings (embedding_dim) in place of the encoder's"
        ),
    )
    encoder_dim: int = Field(
        256, description="semantic, hybrid: the built-in encoder's dimension (64, 128, 256)"
    )
    embedding_dim: int = Field(
        0, ge=0, description="vmf, hybrid: the documents' own embeddings' dimension p"
    )
    vmf_cosine: float = Field(
        0.5, gt=0, lt=1, description="vmf: typical cosine of a member to its cluster's mean (κ)"
    )
    hybrid_cosine: float = Field(
        0.4, gt=0, lt=1, description="hybrid: typical member-to-mean cosine of the vectors (κ)"
    )
    centre_vectors: bool = Field(
        False,
        description="hybrid: score the vectors around the stream's mean vector, not under the "
        "prior fitted to its direction",
    )
    view_weight: float | None = Field(
        None, ge=0, description="hybrid: weight of the vector view (None: 64 / p, at most 1)"
    )
    document_concentration: float | None = Field(
        None,
        ge=0,
        description="s of the words' length tempering; a document of n tokens counts as "
        "n(1 + s)/(n + s) words (0: as n; None: the model's own: svi 50, hybrid 15, else 0)",
    )
    edcm_prior: float = Field(0.001, gt=0, description="edcm: symmetric prior b0 of each β_w")
    edcm_prior_docs: float = Field(
        5.0, gt=0, description="edcm: weight of the prior, in documents (c)"
    )
    edcm_long_words: float = Field(
        40.0,
        ge=0,
        description="edcm: mean distinct words per document at which the long-document prior "
        "starts to replace the short-text one (fully 10 words later; 0 = off)",
    )
    edcm_long_prior: float = Field(0.003, gt=0, description="edcm: b0 of the long-document prior")
    edcm_long_prior_docs: float = Field(
        40.0, gt=0, description="edcm: weight of the long-document prior, in documents (c)"
    )
    edcm_background_docs: float = Field(
        40.0, ge=0, description="edcm: weight of the corpus EDCM in the long prior (c'; 0 = off)"
    )
    alpha: float = Field(0.03, gt=0, description="DP concentration (per document if scaled)")
    beta: float = Field(0.01, gt=0, description="symmetric Dirichlet prior on cluster words")
    alpha_scaling: Literal["none", "batch"] = "batch"
    discount: float = Field(0.5, ge=0, lt=1, description="Pitman–Yor discount (0 = DP)")
    rejuvenation_sweeps: int = Field(2, ge=0, le=1000)
    deterministic: bool = Field(True, description="MAP seating instead of sampling")
    half_life_docs: float = Field(0.0, ge=0, description="forgetting half-life; 0 = off")
    retire_min_mass: float = Field(0.05, ge=0)
    max_active_clusters: int = Field(5000, ge=1)
    merge: bool = Field(True, description="merge new clusters into others when that is MAP")
    absorb_margin: float = Field(
        20.0, ge=0, description="use_labels: log-odds to absorb a cluster into a known category"
    )
    split: bool = Field(True, description="dpmm: split a batch's burst out of an old cluster")
    use_labels: bool = Field(False, description="documents' labels are known categories")
    kappa: float = Field(0.8, gt=0.5, le=1.0, description="svi: step-size exponent κ")
    tau0: float = Field(1.0, ge=0, description="svi: step-size delay τ₀")
    corpus_size: float = Field(0.0, ge=0, description="svi: effective corpus size D (0 = seen)")
    local_step: Literal["cvb0", "vb"] = Field("cvb0", description="svi: local step")
    local_sweeps: int = Field(0, ge=0, description="svi: extra local-step passes per batch")
    topics: int = Field(
        2000, ge=1, le=10_000, description="hdp: number of topics L (more than live categories)"
    )
    zeta: float = Field(5e-4, gt=0, description="hdp: Dirichlet prior ζ of categories on topics")
    gamma: float = Field(10.0, gt=0, description="hdp: category concentration γ (start value)")
    table_alpha: float = Field(
        1.0, gt=0, description="hdp: per-document table concentration α (start value)"
    )
    resample_concentrations: bool = Field(
        True, description="hdp: draw α and γ each batch by the auxiliary-variable method"
    )
    use_context: bool = Field(
        True, description="hdp: documents' context fields are categorical evidence of category"
    )
    context_prior: float = Field(
        0.1, gt=0, description="hdp: Dirichlet prior η of a category's context values"
    )
    seed: int = Field(0, ge=0, lt=2**63, description="random seed (non-negative)")

    @model_validator(mode="wrap")
    @classmethod
    def _defaults_follow_the_engine(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        """Fill an unset likelihood and featurizer from what is set (:func:`default_views`),
        and keep them unset, so that a later layer's engine (``--model svi`` over a file's
        ``alpha``) derives them anew."""
        if not isinstance(data, dict):
            return handler(data)
        derived = {key for key in ("likelihood", "featurizer") if data.get(key) is None}
        settings = handler(default_views(data))
        settings.__pydantic_fields_set__.difference_update(derived)
        return settings

    @model_validator(mode="after")
    def _a_kind_runs_it(self) -> ModelSettings:
        """Settings some model kind can run (``model_kinds``): the edcm and vmf likelihoods are
        ``dpmm`` options; vmf needs the stream's embedding dimension; ``svi`` has no forgetting
        half-life to ignore."""
        reason = refusal(self)
        if reason is not None:
            raise ValueError(reason)
        return self


def default_views(model: dict[str, Any]) -> dict[str, Any]:
    """``model`` settings with an unset likelihood and featurizer filled in from the rest.

    The likelihood defaults to the engine's best view of what the featurizer gives: hybrid
    (words × vectors) for ``dpmm`` and ``hdp`` — the words alone under
    ``featurizer = "words"``, for ``dpmm`` the vectors alone under ``"semantic"`` — and the
    words for ``svi``, which has no vector view. The featurizer defaults to what that
    likelihood reads: the words, or the built-in encoder's vectors with or without them,
    unless the documents bring their own embeddings (``embedding_dim``), which take the
    encoder's place."""
    out = dict(model)
    own_vectors = bool(out.get("embedding_dim") or 0)
    featurizer = out.get("featurizer")
    if out.get("likelihood") is None:
        kind = out.get("kind", "dpmm")
        if kind == "svi":
            out["likelihood"] = "multinomial"
        elif featurizer == "semantic" and kind == "dpmm":
            out["likelihood"] = "vmf"
        elif featurizer == "words" and not own_vectors:
            out["likelihood"] = "multinomial"
        else:
            out["likelihood"] = "hybrid"
    if featurizer is None:
        views = {"hybrid": "hybrid", "vmf": "semantic"}
        out["featurizer"] = "words" if own_vectors else views.get(out["likelihood"], "words")
    return out
