"""Model step stage: the configured inference engine, its reserved vocabulary entries, and
one batch's ``partial_fit`` with its seeded generator and known labels."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from noveld.daemon.settings import Settings
from noveld.daemon.stages.labels import known_uids
from noveld.daemon.stages.live import LiveNamespace
from noveld.models.base import BatchResult, ClusterModel, DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.models.edcm import EDCMConfig, EDCMMixture, length_token
from noveld.models.hdp import HDP, HDPConfig, topic_token
from noveld.models.kernels.edcm import N_BINS as EDCM_LENGTH_BINS
from noveld.models.svi import SVI, SVIConfig
from noveld.models.vmf import VMFConfig, VMFMixture, dimension_tokens
from noveld.models.vocabulary import Vocabulary, uncounted_ids
from noveld.schema import Document
from noveld.state.base import NamespaceState, StateStore


def make_model(settings: Settings) -> ClusterModel:
    """The configured inference engine."""
    m = settings.model
    if m.kind == "hdp":
        return HDP(
            HDPConfig(
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
            )
        )
    if m.likelihood == "edcm":
        base = replace(model_config(settings), merge=False, split=False)
        return EDCMMixture(
            EDCMConfig(**base.__dict__, prior=m.edcm_prior, prior_docs=m.edcm_prior_docs)
        )
    if m.likelihood == "vmf":
        base = replace(model_config(settings), merge=False, split=False)
        return VMFMixture(
            VMFConfig(**base.__dict__, dimension=m.embedding_dim, cosine=m.vmf_cosine)
        )
    if m.kind == "svi":
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
    return DPMM(model_config(settings))


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
    )


def bind_reserved(
    model: ClusterModel, store: StateStore, state: NamespaceState, vocab: Vocabulary
) -> None:
    """Tell the model the ids of its reserved vocabulary entries (hdp topics, vmf
    dimensions, edcm length bins), interning those the namespace lacks (at start, and
    after a vocabulary compaction renumbered them)."""
    if isinstance(model, HDP | VMFMixture):  # context values, embedding dimensions
        model.uncounted_words = lambda: uncounted_ids(state.vocab)
    if isinstance(model, HDP):
        topics = range(model.config.topics)
        model.bind_topic_words(reserved_ids(store, state, vocab, [topic_token(t) for t in topics]))
    if isinstance(model, VMFMixture):
        pairs = [dimension_tokens(j) for j in range(model.config.dimension)]
        ids = reserved_ids(store, state, vocab, [t for pair in pairs for t in pair])
        model.bind_dimension_words(ids[0::2], ids[1::2])
    if isinstance(model, EDCMMixture):
        bins = range(EDCM_LENGTH_BINS)
        model.bind_length_words(reserved_ids(store, state, vocab, [length_token(b) for b in bins]))


def reserved_ids(
    store: StateStore, state: NamespaceState, vocab: Vocabulary, wanted: list[str]
) -> list[int]:
    """Vocabulary ids of the model's reserved entries (hdp topics, vmf dimensions, edcm
    length bins): namespace-wide, interned through the store like any new word."""
    missing = [w for w in wanted if w not in vocab]
    if missing:
        known = len(state.vocab)
        shared = store.intern(state, known, missing)
        vocab.extend(shared)
    ids = [vocab.get(w) for w in wanted]
    return [int(i) for i in ids if i is not None]


def fit(
    model: ClusterModel,
    store: StateStore,
    live: LiveNamespace,
    batch: DocBatch,
    docs: Sequence[Document],
    first_offsets: dict[str, int],
    settings: Settings,
) -> BatchResult:
    """One model step over a non-empty batch, seeded by the model seed and the batch's first
    offsets (the same batch draws the same numbers on every replica and replay)."""
    seed_parts = [settings.model.seed, *sorted(first_offsets.values())]
    rng = np.random.default_rng(seed_parts)
    store.before_batch(live.state, first_offsets)
    known = known_uids(docs, live.known_labels, settings.model.use_labels)
    return model.partial_fit(batch, live.state.stats, rng, known, frozenset(live.known_labels))
