"""The model kinds (engine and likelihood) and what each reads: its command-line flags, the
shared flags it ignores and the settings of its fingerprint, described once per kind."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from noveld.daemon.flags import Exclusive, Flag, flag


class Model(Protocol):
    """What the registry reads of the ``model`` settings section (``ModelSettings``)."""

    @property
    def kind(self) -> str: ...

    @property
    def likelihood(self) -> str: ...


#: the model's value flags, in ``--help`` order: flag, ``model.*`` setting, type, help
_VALUE_FLAGS: tuple[tuple[str, str, type, str], ...] = (
    ("--alpha", "alpha", float, "DP concentration α (per document of the batch when scaled)"),
    ("--beta", "beta", float, "symmetric Dirichlet prior β on cluster word distributions"),
    ("--alpha-scaling", "alpha_scaling", str, "none | batch (α·|B|, as MStream)"),
    ("--discount", "discount", float, "Pitman–Yor discount in [0, 1) (hdp: of categories); 0 = DP"),
    ("--rejuvenation-sweeps", "rejuvenation_sweeps", int, "Gibbs sweeps over each batch"),
    ("--half-life", "half_life_docs", float, "forgetting half-life in documents (0 = off)"),
    ("--retire-min-mass", "retire_min_mass", float, "retire clusters whose mass falls below"),
    ("--max-active-clusters", "max_active_clusters", int, "evict the lightest clusters beyond"),
    ("--seed", "seed", int, "random seed (runs are reproducible per seed)"),
    ("--topics", "topics", int, "hdp: number of topics L (keep above the live categories)"),
    ("--zeta", "zeta", float, "hdp: Dirichlet prior ζ of categories on topics"),
    ("--gamma", "gamma", float, "hdp: category concentration γ (start value when resampled)"),
    ("--table-alpha", "table_alpha", float, "hdp: per-document table concentration α (start)"),
    ("--context-prior", "context_prior", float, "hdp: Dirichlet prior η of context values"),
    ("--likelihood", "likelihood", str,
     "dpmm, hdp: hybrid (words × vectors, default) | multinomial (words); dpmm: edcm | vmf"),
    ("--featurizer", "featurizer", str,
     "hybrid | words | semantic (text → vector); default: what the likelihood reads"),
    ("--encoder-dim", "encoder_dim", int, "semantic, hybrid: the encoder's dimension (256)"),
    ("--edcm-prior", "edcm_prior", float, "edcm: symmetric prior b0 of each word's β (0.001)"),
    ("--edcm-prior-docs", "edcm_prior_docs", float, "edcm: the prior's weight in documents (5)"),
    ("--edcm-long-words", "edcm_long_words", float, "edcm: ū where long prior starts (40; 0 off)"),
    ("--edcm-long-prior", "edcm_long_prior", float, "edcm: b0 of the long-document prior (0.003)"),
    ("--edcm-long-prior-docs", "edcm_long_prior_docs", float, "edcm: its weight c, in docs (40)"),
    ("--edcm-background-docs", "edcm_background_docs", float, "edcm: corpus EDCM's weight c' (40)"),
    ("--embedding-dim", "embedding_dim", int, "vmf, hybrid: the own embeddings' dimension p"),
    ("--vmf-cosine", "vmf_cosine", float, "vmf: typical member-to-mean cosine, sets κ (0.5)"),
    ("--hybrid-cosine", "hybrid_cosine", float, "hybrid: the vectors' member-to-mean cosine (0.4)"),
    ("--view-weight", "view_weight", float, "hybrid: the vector view's weight (64 / p, ≤ 1)"),
    ("--document-concentration", "document_concentration", float,
     "s: n words count as n(1+s)/(n+s) (svi 50, dpmm's hybrid 15, else 0 = n)"),
)  # fmt: skip
MODEL_FLAGS: tuple[Flag, ...] = tuple(
    flag(name, setting=f"model.{key}", dest=key, type=typ, help=help_)
    for name, key, typ, help_ in _VALUE_FLAGS
)

#: the model's on/off flags, each pair exclusive, in ``--help`` order after the value flags
MODEL_SWITCHES: tuple[Exclusive | Flag, ...] = (
    Exclusive(
        (
            flag(
                "--deterministic",
                setting="model.deterministic",
                dest="deterministic",
                action="store_true",
                default=None,
                help="MAP seating (default)",
            ),
            flag(
                "--sampled",
                setting="model.deterministic",
                dest="deterministic",
                action="store_false",
                help="sample seatings from the CRP conditional",
            ),
        )
    ),
    flag(
        "--centre-vectors",
        setting="model.centre_vectors",
        dest="centre_vectors",
        action="store_true",
        default=None,
        help="hybrid: score the vectors around the stream's mean vector instead of under the "
        "prior fitted to its direction (opens more clusters)",
    ),
    flag(
        "--use-labels",
        setting="model.use_labels",
        dest="use_labels",
        action="store_true",
        default=None,
        help="treat documents' label field as known categories (semi-supervised: labelled "
        "documents are seated in their category; new clusters are novel)",
    ),
    Exclusive(
        (
            flag(
                "--use-context",
                setting="model.use_context",
                dest="use_context",
                action="store_true",
                default=None,
                help="hdp: documents' context fields are evidence of their category (default)",
            ),
            flag(
                "--ignore-context",
                setting="model.use_context",
                dest="use_context",
                action="store_false",
                help="hdp: cluster on content only",
            ),
        )
    ),
)


def _accepted(_model: Any) -> str | None:
    return None


#: the built-in encoder's model (``noveld.featurize.encoder.WORDLLAMA_MODEL``), named here so
#: that settings load without the encoder's imports
ENCODER_MODEL = "wordllama/l2_supercat"
ENCODER_DIMENSIONS = (64, 128, 256)
#: what the engines without a vector view would take to read one
_NO_VECTORS = {
    "svi": "vMF components in its natural-gradient step",
}


def encoder_id(model: Any) -> str:
    """The built-in encoder's model id at the configured dimension (as ``model_id`` says it)."""
    return f"{ENCODER_MODEL}@{model.encoder_dim}"


def dense_dimension(model: Any) -> int:
    """The dimension of the documents' vectors: the encoder's under a semantic or hybrid
    featurizer, else the documents' own embeddings' (0: none)."""
    if model.featurizer != "words":
        return int(model.encoder_dim)
    return int(model.embedding_dim)


def _featurizer_refusal(model: Any) -> str | None:
    """Why the featurizer cannot feed this engine and likelihood, or None."""
    if model.encoder_dim not in ENCODER_DIMENSIONS:
        return f"model.encoder_dim is one of {ENCODER_DIMENSIONS}, not {model.encoder_dim}"
    if model.featurizer == "words":
        return None
    if model.kind in _NO_VECTORS:
        return (
            f"--featurizer {model.featurizer} needs a vector view that --model {model.kind} "
            f"does not have (it would take {_NO_VECTORS[model.kind]}); use --model dpmm "
            "--likelihood vmf or hybrid, or --featurizer words"
        )
    if model.likelihood in ("multinomial", "edcm"):
        return (
            f"--likelihood {model.likelihood} reads words only: --featurizer "
            f"{model.featurizer} needs --likelihood vmf or hybrid"
        )
    if model.embedding_dim not in (0, model.encoder_dim):
        return (
            f"model.embedding_dim {model.embedding_dim} differs from model.encoder_dim "
            f"{model.encoder_dim}: documents' own embeddings stand in for the encoder's "
            "vectors, so they must have its dimension"
        )
    return None


def _vmf_dimension(model: Any) -> str | None:
    if model.featurizer == "hybrid":
        return "--likelihood vmf clusters vectors only: use --featurizer semantic"
    if dense_dimension(model) < 2:
        return (
            "likelihood 'vmf' needs model.embedding_dim (>= 2), or --featurizer semantic "
            "(vectors from the text)"
        )
    return None


def _hybrid_views(model: Any) -> str | None:
    if model.featurizer == "semantic":
        return "--likelihood hybrid reads words too: use --featurizer hybrid"
    if dense_dimension(model) < 2:
        return (
            "likelihood 'hybrid' needs vectors: --featurizer hybrid (from the text), or "
            "model.embedding_dim (>= 2) for the documents' own embeddings"
        )
    return None


def _hdp_views(model: Any) -> str | None:
    if model.featurizer == "semantic":
        return "--model hdp reads words and vectors: use --featurizer hybrid (or words)"
    return _hybrid_views(model)


def _svi_forgets_by_step_size(model: Any) -> str | None:
    if model.half_life_docs > 0:
        return (
            "half_life_docs (forgetting) is a dpmm and hdp setting: svi forgets through its "
            "step size (kappa, tau0); leave half_life_docs at 0 with --model svi"
        )
    return None


#: the EDCM's settings: its short-text prior and the long-document prior it moves to as the
#: corpus's documents grow long (``noveld.models.edcm.EDCMConfig``); all shape its statistics
EDCM_SETTINGS = (
    "edcm_prior",
    "edcm_prior_docs",
    "edcm_long_words",
    "edcm_long_prior",
    "edcm_long_prior_docs",
    "edcm_background_docs",
)


#: the hdp's own settings, and those of them its fingerprint names
HDP_SETTINGS = ("topics", "zeta", "gamma", "table_alpha", "context_prior", "use_context",
                "document_concentration")  # fmt: skip
HDP_FINGERPRINT = ("topics", "zeta", "gamma", "table_alpha", "use_context", "context_prior")


@dataclass(frozen=True)
class ModelKind:
    """One engine with one likelihood: the model settings only it reads (``own``), the shared
    ones it does not read (``ignores``), the settings its fingerprint adds, in order, and why
    it refuses settings it cannot run with (``refuses``: the reason, or None). ``tempering``
    is its default s of the words' length tempering (``document_concentration``; None: it has
    none): the fingerprint names s when it is on, or always when listed there."""

    kind: str
    likelihood: str
    own: tuple[str, ...] = ()
    ignores: tuple[str, ...] = ()
    fingerprint: tuple[str, ...] = ()
    refuses: Callable[[Any], str | None] = _accepted
    tempering: float | None = None

    def reads(self, key: str) -> bool:
        """Whether this kind reads model setting ``key``."""
        if key in self.own:
            return True
        owned = any(key in other.own for other in KINDS)
        return not owned and key not in self.ignores


#: every kind in the order ``--model`` lists the engines, then the other likelihoods
KINDS: tuple[ModelKind, ...] = (
    ModelKind("dpmm", "multinomial", own=("document_concentration",), tempering=0.0),
    # svi's local step has its own passes (model.local_sweeps)
    ModelKind(
        "svi",
        "multinomial",
        own=("document_concentration",),
        ignores=("rejuvenation_sweeps",),
        fingerprint=("kappa", "tau0", "corpus_size"),
        refuses=_svi_forgets_by_step_size,
        tempering=50.0,
    ),
    # hdp's category level has its own concentration (γ, --gamma)
    ModelKind(
        "hdp",
        "multinomial",
        own=HDP_SETTINGS,
        ignores=("alpha", "alpha_scaling"),
        fingerprint=HDP_FINGERPRINT,
        tempering=0.0,
    ),
    ModelKind(
        "dpmm",
        "edcm",
        own=EDCM_SETTINGS,
        fingerprint=EDCM_SETTINGS,
    ),
    ModelKind(
        "dpmm",
        "vmf",
        own=("embedding_dim", "vmf_cosine"),
        fingerprint=("embedding_dim", "vmf_cosine"),
        refuses=_vmf_dimension,
    ),
    ModelKind(
        "dpmm",
        "hybrid",
        own=(
            "embedding_dim",
            "hybrid_cosine",
            "view_weight",
            "document_concentration",
            "centre_vectors",
        ),
        fingerprint=("embedding_dim", "hybrid_cosine", "view_weight", "document_concentration"),
        refuses=_hybrid_views,
        tempering=15.0,
    ),
    # hdp with a vMF term per category on the documents' vectors
    ModelKind(
        "hdp",
        "hybrid",
        own=(*HDP_SETTINGS, "embedding_dim", "hybrid_cosine", "view_weight"),
        ignores=("alpha", "alpha_scaling"),
        fingerprint=(*HDP_FINGERPRINT, "embedding_dim", "hybrid_cosine", "view_weight"),
        refuses=_hdp_views,
        tempering=0.0,
    ),
)


def kind_of(model: Model) -> ModelKind:
    """The kind these settings run (the settings allow only the combinations listed)."""
    return next(k for k in KINDS if (k.kind, k.likelihood) == (model.kind, model.likelihood))


def refusal(model: Model) -> str | None:
    """Why no kind can run these model settings (an engine without this likelihood, or a
    kind's own refusal), or None."""
    pair = (model.kind, model.likelihood)
    kind = next((k for k in KINDS if (k.kind, k.likelihood) == pair), None)
    if kind is None:
        engines = " or ".join(
            dict.fromkeys(k.kind for k in KINDS if k.likelihood == model.likelihood)
        )
        return f"likelihood {model.likelihood!r} is a {engines} option, not {model.kind!r}"
    return _featurizer_refusal(model) or kind.refuses(model)


def document_concentration(model: Any) -> float:
    """s of the words' length tempering these settings run: the setting, else the kind's own
    default (0 for a kind without tempering)."""
    if model.document_concentration is not None:
        return float(model.document_concentration)
    return kind_of(model).tempering or 0.0


def kind_fingerprint(model: Model) -> dict[str, Any]:
    """The settings of this kind that shape its stored statistics (its fingerprint's part):
    ``embedding_dim`` is the vectors' dimension, whoever makes them; s of the length
    tempering when it is on (a fingerprint written without it stays valid)."""
    kind = kind_of(model)
    resolved = {"embedding_dim": dense_dimension, "document_concentration": document_concentration}
    own = {
        key: resolved[key](model) if key in resolved else getattr(model, key)
        for key in kind.fingerprint
    }
    if kind.tempering is not None and document_concentration(model) > 0.0:
        own.setdefault("document_concentration", document_concentration(model))
    return own | featurizer_fingerprint(model)


def featurizer_fingerprint(model: Any) -> dict[str, Any]:
    """The featurizer and its encoder, when they are not the default words (the words'
    fingerprint predates them and stays as it was)."""
    if model.featurizer == "words":
        return {}
    return {
        "featurizer": model.featurizer,
        "encoder": encoder_id(model),
        "encoder_dim": model.encoder_dim,
    }


def restricted_settings() -> Iterator[str]:
    """Model settings that some kinds read and others do not: each kind's own, in the
    registry's order, then the shared ones some kind ignores, in flag order."""
    seen: set[str] = set()
    for k in KINDS:
        for key in k.own:
            if key not in seen:
                seen.add(key)
                yield key
    ignored = {key for k in KINDS for key in k.ignores}
    for f in MODEL_FLAGS:
        key = f.dest
        if key in ignored and key not in seen:
            seen.add(key)
            yield key


def readers(key: str) -> str:
    """Who reads model setting ``key``, in a flag's words: ``--model hdp``, ``--likelihood
    edcm``, ``--model dpmm or svi``, ``--model svi or hdp and dpmm's --likelihood
    multinomial or hybrid``."""
    kinds = [k for k in KINDS if k.reads(key)]
    dpmm = [k for k in KINDS if k.kind == "dpmm"]
    some_dpmm = [k.likelihood for k in kinds if k.kind == "dpmm"]
    if 0 < len(some_dpmm) < len(dpmm):
        likelihoods = "--likelihood " + " or ".join(some_dpmm)
        others = [k.kind for k in kinds if k.kind != "dpmm"]
        if not others:
            return likelihoods
        return f"--model {' or '.join(dict.fromkeys(others))} and dpmm's {likelihoods}"
    return "--model " + " or ".join(dict.fromkeys(k.kind for k in kinds))
