"""Featurize stage: documents to a ``DocBatch`` with namespace-wide word ids (and vectors, from
the documents' embeddings or the built-in encoder); documents with nothing to cluster are
dead-lettered as empty content."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from noveld.connectors.jsonl import Record
from noveld.daemon.errors import UserError
from noveld.daemon.stages.decode import Rejections
from noveld.daemon.stages.live import LiveNamespace
from noveld.daemon.stages.report import BatchReport, StateDiverged
from noveld.featurize import TextViews
from noveld.featurize.encoder import EncoderUnavailable, TextEncoder, shared_encoder
from noveld.models.base import DocBatch
from noveld.schema import DecodedDocument, InvalidReason
from noveld.state.base import CommitOutcome, StaleVocabulary, StateStore


class Views(NamedTuple):
    """What the model clusters documents by (``words``, ``vector`` or ``both``) and whether the
    built-in encoder computes the vectors of documents without an embedding."""

    clustered_by: Literal["words", "vector", "both"]
    encoded: bool = False


def text_encoder(model: Any) -> TextEncoder | None:
    """The built-in encoder the ``semantic`` and ``hybrid`` featurizers read text with (loaded
    once per process), or None for ``words``; a missing package is the user's to fix."""
    if model.featurizer == "words":
        return None
    try:
        return shared_encoder(model.encoder_dim)
    except EncoderUnavailable as exc:
        raise UserError(f"--featurizer {model.featurizer}: {exc}") from None


def empty_detail(doc: DecodedDocument, views: Views) -> str:
    """Why a decoded document has nothing to cluster."""
    if views.clustered_by == "both":
        return "no tokens after tokenization and no embedding (hybrid: a text by its words)"
    if views.clustered_by == "vector":
        if doc.embedding is not None:
            return "zero embedding: a zero vector has no direction"
        if views.encoded:
            return "no vector: the text has no token the encoder knows, and no embedding"
        return "no embedding: the vmf likelihood clusters documents by their embedding"
    if doc.text is None and doc.tokens is None and doc.embedding is not None:
        return "embedding only: no text or tokens (embeddings are clustered with --likelihood vmf)"
    return "no tokens after tokenization"


def featurize_shared(
    live: LiveNamespace,
    store: StateStore,
    docs: list[DecodedDocument],
    read: Sequence[TextViews] | None = None,
) -> tuple[DocBatch, list[int]]:
    """Featurize (with the documents' tokens and vectors ``read`` ahead, if they were), then
    give words new to this process their namespace-wide ids; if another writer added words
    meanwhile, adopt its ids and featurize again."""
    known = len(live.state.vocab)
    batch, empty = live.featurizer.featurize(docs, read=read)
    if len(live.vocab) == known:
        return batch, empty
    new_words = live.vocab.words_since(known)
    shared = store.intern(live.state, known, new_words)
    if shared != new_words:
        live.vocab.truncate(known)
        live.vocab.extend(shared)
        batch, empty = live.featurizer.featurize(docs, read=read)
    return batch, empty


def featurize(
    live: LiveNamespace,
    store: StateStore,
    docs: list[DecodedDocument],
    kept: list[Record],
    views: Views,
    rejects: Rejections,
    rep: BatchReport,
    read: Sequence[TextViews] | None = None,
) -> tuple[DocBatch, list[DecodedDocument], list[Record]]:
    """The batch of the documents with something to cluster, those documents and their
    records; the others are rejected as empty content. ``read``: the documents' tokens and
    vectors computed ahead (:mod:`noveld.daemon.stages.prefetch`), or None."""
    try:
        batch, empty = featurize_shared(live, store, docs, read)
    except StaleVocabulary as exc:
        raise StateDiverged(
            f"{exc}; the in-memory model's word ids are old", CommitOutcome.STALE
        ) from exc
    if empty:
        drop = set(empty)
        for i in sorted(drop):
            detail = empty_detail(docs[i], views)
            rejects.reject(kept[i], InvalidReason.EMPTY_CONTENT, detail, rep)
        docs = [d for i, d in enumerate(docs) if i not in drop]
        kept = [r for i, r in enumerate(kept) if i not in drop]
    return batch, docs, kept
