"""Featurizers: documents to the model's views of them. ``words`` makes vocabulary ids
(:mod:`noveld.featurize.words`); ``encoder`` turns text into dense unit vectors with a local
static-vector model (:mod:`noveld.featurize.encoder`)."""

from noveld.featurize.words import (
    DEFAULT_PATTERN,
    Featurizer,
    TextViews,
    Tokenizer,
    batch_from_flat,
    build_batch,
    read_texts,
    unit_embedding,
)

__all__ = [
    "DEFAULT_PATTERN",
    "Featurizer",
    "TextViews",
    "Tokenizer",
    "batch_from_flat",
    "build_batch",
    "read_texts",
    "unit_embedding",
]
