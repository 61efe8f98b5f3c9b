"""The model variants the pipeline runs (dpmm, svi, hdp, and dpmm's edcm and vmf likelihoods),
each with its factory and the hooks the stages need, in one table instead of type ladders.

It is keyed like :mod:`noveld.daemon.model_kinds` (engine, likelihood), which says which
settings each variant reads; that module stays free of the models' imports, so that settings
and ``noveld check`` load fast, and this one holds what needs the models."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import cast

import numpy as np

from noveld.daemon.model_kinds import dense_dimension, document_concentration
from noveld.daemon.settings import ModelSettings, Settings
from noveld.models.base import ClusterModel, DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.models.edcm import EDCMConfig, EDCMMixture, length_token
from noveld.models.hdp import HDP, HDPConfig, topic_token
from noveld.models.hdp.vectors import VECTOR_COUNT_TOKEN
from noveld.models.hybrid import HybridMixture
from noveld.models.hybrid_config import HybridConfig
from noveld.models.kernels.edcm import N_BINS as EDCM_LENGTH_BINS
from noveld.models.svi import SVI, SVIConfig
from noveld.models.vmf import VMFConfig, VMFMixture, dimension_tokens
from noveld.models.vocabulary import uncounted_ids

#: the namespace's vocabulary ids of reserved entries, interned where missing
ReserveIds = Callable[[list[str]], list[int]]
#: the namespace's current vocabulary list (what ``uncounted_ids`` reads)
VocabList = Callable[[], list[str]]
#: per document of a batch, the (ids, values) the novelty tracker keeps for a candidate's members
MemberFeatures = Callable[[ClusterModel, DocBatch], Sequence[tuple[np.ndarray, np.ndarray]]]


def _no_reserved(model: ClusterModel, vocab: VocabList, reserve: ReserveIds) -> None:
    """A model with no reserved vocabulary entries."""


@dataclass(frozen=True)
class ModelVariant:
    """One model variant: how to build it and what sets it apart in the batch loop."""

    kind: str
    likelihood: str
    build: Callable[[Settings], ClusterModel]
    #: tell the model the ids of its reserved vocabulary entries (at start, after compaction)
    bind_reserved: Callable[[ClusterModel, VocabList, ReserveIds], None] = _no_reserved
    #: the novelty tracker's member features; None: each document's word ids and counts
    member_features: MemberFeatures | None = None
    #: documents are clustered by their vector (an embedding, or the encoder's)
    embeddings: bool = False
    #: ... and by their words as well (a document with either is clustered)
    words: bool = False
    #: the model can read documents' categorical context fields (``model.use_context``)
    context: bool = False


def model_config(settings: Settings) -> DPMMConfig:
    """Model hyperparameters from the settings (the ``dpmm`` part, shared by ``svi``)."""
    m = settings.model
    return DPMMConfig(
        alpha=m.alpha,
        beta=m.beta,
        alpha_scaling=m.alpha_scaling,
        rejuvenation_sweeps=m.rejuvenation_sweeps,
        deterministic=m.deterministic,
        half_life_docs=m.half_life_docs,
        retire_min_mass=m.retire_min_mass,
        max_active_clusters=m.max_active_clusters,
        discount=m.discount,
        merge=m.merge,
        absorb_margin=m.absorb_margin,
        split=m.split,
        document_concentration=document_concentration(m),
    )


def _build_dpmm(settings: Settings) -> ClusterModel:
    return DPMM(model_config(settings))


def _build_svi(settings: Settings) -> ClusterModel:
    m = settings.model
    base = replace(model_config(settings), rejuvenation_sweeps=m.local_sweeps)
    return SVI(
        SVIConfig(
            **base.__dict__,
            kappa=m.kappa,
            tau0=m.tau0,
            corpus_size=m.corpus_size,
            local_step=m.local_step,
        )
    )


def _build_hdp(settings: Settings) -> ClusterModel:
    return HDP(hdp_config(settings))


def _build_hdp_hybrid(settings: Settings) -> ClusterModel:
    m = settings.model
    return HDP(
        replace(
            hdp_config(settings),
            dimension=dense_dimension(m),
            cosine=m.hybrid_cosine,
            view_weight=m.view_weight,
        )
    )


def hdp_config(settings: Settings) -> HDPConfig:
    """The hdp hyperparameters of the settings (words only)."""
    m = settings.model
    return HDPConfig(
        topics=m.topics,
        beta=m.beta,
        zeta=m.zeta,
        table_alpha=m.table_alpha,
        gamma=m.gamma,
        discount=m.discount,
        resample_concentrations=m.resample_concentrations,
        context_prior=m.context_prior,
        split=m.split,
        merge=m.merge,
        absorb_margin=m.absorb_margin,
        sweeps=m.rejuvenation_sweeps,
        deterministic=m.deterministic,
        half_life_docs=m.half_life_docs,
        retire_min_mass=m.retire_min_mass,
        max_active_clusters=m.max_active_clusters,
        document_concentration=document_concentration(m),
    )


#: the width, in mean distinct words per document, of the EDCM's ramp from its short-text to its
#: long-document prior (``EDCMConfig.long_words_full - long_words``). Internal: it only smooths
#: the switch so that a corpus near the threshold does not flip priors batch to batch; users
#: move the ramp with ``model.edcm_long_words``
EDCM_LONG_RAMP = EDCMConfig.long_words_full - EDCMConfig.long_words


def _build_edcm(settings: Settings) -> ClusterModel:
    m = settings.model
    base = replace(model_config(settings), merge=False, split=False)
    return EDCMMixture(
        EDCMConfig(
            **base.__dict__,
            prior=m.edcm_prior,
            prior_docs=m.edcm_prior_docs,
            long_words=m.edcm_long_words,
            long_words_full=m.edcm_long_words + EDCM_LONG_RAMP,
            long_prior=m.edcm_long_prior,
            long_prior_docs=m.edcm_long_prior_docs,
            background_docs=m.edcm_background_docs,
        )
    )


def _build_vmf(settings: Settings) -> ClusterModel:
    m = settings.model
    base = replace(model_config(settings), merge=False, split=False)
    return VMFMixture(VMFConfig(**base.__dict__, dimension=dense_dimension(m), cosine=m.vmf_cosine))


def _build_hybrid(settings: Settings) -> ClusterModel:
    m = settings.model
    return HybridMixture(
        HybridConfig(
            **replace(model_config(settings), split=False).__dict__,
            dimension=dense_dimension(m),
            cosine=m.hybrid_cosine,
            view_weight=m.view_weight,
            centre=m.centre_vectors,
        )
    )


def _hdp_reserved(model: ClusterModel, vocab: VocabList, reserve: ReserveIds) -> None:
    """Context values are not counted as words; the topics are reserved entries."""
    hdp = cast(HDP, model)
    hdp.uncounted_words = lambda: uncounted_ids(vocab())
    hdp.bind_topic_words(reserve([topic_token(t) for t in range(hdp.config.topics)]))


def _hdp_hybrid_reserved(model: ClusterModel, vocab: VocabList, reserve: ReserveIds) -> None:
    """The topics, each dimension's pair and the vectors' count are reserved entries."""
    _hdp_reserved(model, vocab, reserve)
    hdp = cast(HDP, model)
    pairs = [dimension_tokens(j) for j in range(hdp.config.dimension)]
    ids = reserve([t for pair in pairs for t in pair] + [VECTOR_COUNT_TOKEN])
    hdp.bind_dimension_words(ids[0:-1:2], ids[1:-1:2], ids[-1])


def _vmf_reserved(model: ClusterModel, vocab: VocabList, reserve: ReserveIds) -> None:
    """Embedding dimensions are not counted as words; each has a pair of reserved entries
    (the vmf and hybrid likelihoods)."""
    vmf = cast(VMFMixture, model)
    vmf.uncounted_words = lambda: uncounted_ids(vocab())
    pairs = [dimension_tokens(j) for j in range(vmf.config.dimension)]
    ids = reserve([t for pair in pairs for t in pair])
    vmf.bind_dimension_words(ids[0::2], ids[1::2])


def _edcm_reserved(model: ClusterModel, vocab: VocabList, reserve: ReserveIds) -> None:
    """The document length bins are reserved entries."""
    edcm = cast(EDCMMixture, model)
    edcm.bind_length_words(reserve([length_token(b) for b in range(EDCM_LENGTH_BINS)]))


def _vmf_members(model: ClusterModel, batch: DocBatch) -> Sequence[tuple[np.ndarray, np.ndarray]]:
    """A member's vector (vmf), or its words and vector (hybrid: its own override)."""
    return cast(VMFMixture, model).member_features(batch)


VARIANTS: dict[tuple[str, str], ModelVariant] = {
    (v.kind, v.likelihood): v
    for v in (
        ModelVariant("dpmm", "multinomial", _build_dpmm),
        ModelVariant("svi", "multinomial", _build_svi),
        ModelVariant("hdp", "multinomial", _build_hdp, _hdp_reserved, context=True),
        ModelVariant(
            "hdp",
            "hybrid",
            _build_hdp_hybrid,
            _hdp_hybrid_reserved,
            embeddings=True,
            words=True,
            context=True,
        ),
        ModelVariant("dpmm", "edcm", _build_edcm, _edcm_reserved),
        ModelVariant("dpmm", "vmf", _build_vmf, _vmf_reserved, _vmf_members, embeddings=True),
        ModelVariant(
            "dpmm",
            "hybrid",
            _build_hybrid,
            _vmf_reserved,
            _vmf_members,
            embeddings=True,
            words=True,
        ),
    )
}


def variant_of(m: ModelSettings) -> ModelVariant:
    """The variant the model settings select (the settings admit only registered pairs)."""
    return VARIANTS[(m.kind, m.likelihood)]


def make_model(settings: Settings) -> ClusterModel:
    """The configured inference engine."""
    return variant_of(settings.model).build(settings)
