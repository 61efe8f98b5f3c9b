"""Model step stage: the model's reserved vocabulary entries, and one batch's ``partial_fit``
with its seeded generator and known labels."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from noveld.daemon.model_registry import ModelVariant
from noveld.daemon.settings import Settings
from noveld.daemon.stages.labels import known_uids
from noveld.daemon.stages.live import LiveNamespace
from noveld.models.base import BatchResult, ClusterModel, DocBatch
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument
from noveld.state.base import NamespaceState, StateStore


def bind_reserved(
    variant: ModelVariant,
    model: ClusterModel,
    store: StateStore,
    state: NamespaceState,
    vocab: Vocabulary,
) -> None:
    """Tell the model the ids of its reserved vocabulary entries (hdp topics, vmf
    dimensions, edcm length bins), interning those the namespace lacks (at start, and
    after a vocabulary compaction renumbered them)."""
    variant.bind_reserved(
        model, lambda: state.vocab, lambda wanted: reserved_ids(store, state, vocab, wanted)
    )


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


def refresh(store: StateStore, live: LiveNamespace) -> None:
    """Take in what other writers committed since this one last did (``batch.refresh``):
    their statistics, the words they added and, for the novelty candidates, the documents
    they seated."""
    live.take_in_foreign(store.refresh(live.state))


def fit(
    model: ClusterModel,
    store: StateStore,
    live: LiveNamespace,
    batch: DocBatch,
    docs: Sequence[DecodedDocument],
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
