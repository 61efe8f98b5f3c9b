"""Documents → vocabulary ids → ``DocBatch`` (a pipeline stage), fast enough for the hot loop.

Tokenizing is one regex pass per text, id lookup one dict probe per token, and the CSR batch is
built with a few vectorised numpy calls per batch (no per-document numpy work).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.vocabulary import RESERVED_PREFIX, Vocabulary, context_tokens
from noveld.schema import DecodedDocument

if TYPE_CHECKING:
    from noveld.featurize.encoder import TextEncoder

DEFAULT_PATTERN = r"[^\W_]+(?:['’][^\W_]+)*"
"""Unicode word tokens: letters/digits, with inner apostrophes kept ("don't", "o’neill")."""


@dataclass(frozen=True)
class Tokenizer:
    """Regex tokenizer: lowercases, keeps matches of ``pattern`` at least ``min_token_len`` long.

    The typographic apostrophe ’ is normalized to ' first, so "don’t" and "don't" are one word.
    """

    lowercase: bool = True
    min_token_len: int = 1
    pattern: str = DEFAULT_PATTERN
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_regex", re.compile(self.pattern))

    def tokenize(self, text: str) -> list[str]:
        """Split ``text`` into normalized tokens."""
        if self.lowercase:
            text = text.lower()
        if "’" in text:
            text = text.replace("’", "'")
        tokens: list[str] = self._regex.findall(text)
        if self.min_token_len > 1:
            n = self.min_token_len
            tokens = [t for t in tokens if len(t) >= n]
        return tokens

    def normalize(self, tokens: Iterable[str]) -> list[str]:
        """Apply the same normalization to pre-tokenized input (no re-splitting; drops empties)."""
        n = max(self.min_token_len, 1)
        kept = [t for t in tokens if len(t) >= n and not t.startswith(RESERVED_PREFIX)]
        if self.lowercase:
            return [t.lower().replace("’", "'") for t in kept]
        return [t.replace("’", "'") for t in kept]


def batch_from_flat(
    flat_ids: np.ndarray,
    lengths: np.ndarray,
    vocab_size: int,
    reserved: int = 0,
    dropped: int = 0,
) -> DocBatch:
    """CSR ``DocBatch`` from all documents' word ids concatenated and each document's length;
    ``reserved`` of the ``vocab_size`` entries are not words, ``dropped`` words were compacted
    out (:class:`DocBatch`)."""
    n = int(lengths.shape[0])
    lengths = lengths.astype(np.int64, copy=False)
    if flat_ids.shape[0] == 0:
        empty = np.zeros(0, dtype=np.int64)
        return DocBatch(
            np.zeros(n + 1, dtype=np.int64),
            empty,
            empty.copy(),
            lengths,
            vocab_size,
            reserved,
            dropped,
        )
    flat = flat_ids.astype(np.int64, copy=False)
    doc_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
    stride = max(vocab_size, int(flat.max()) + 1)
    keys, counts = np.unique(doc_of * stride + flat, return_counts=True)
    per_doc = np.bincount(keys // stride, minlength=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(per_doc, out=ptr[1:])
    return DocBatch(
        ptr,
        keys % stride,
        counts.astype(np.int64, copy=False),
        lengths,
        vocab_size,
        reserved,
        dropped,
    )


def build_batch(docs: list[list[int]], vocab_size: int) -> DocBatch:
    """Vectorised equivalent of ``DocBatch.from_docs`` (same arrays, dtypes and order)."""
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    flat = np.array([i for d in docs for i in d], dtype=np.int64)
    return batch_from_flat(flat, lengths, vocab_size)


def unit_embedding(doc: DecodedDocument) -> np.ndarray | None:
    """The document's embedding scaled to unit length; None without one, or for a
    zero vector (it has no direction)."""
    if doc.embedding is None:
        return None
    x = np.asarray(doc.embedding, dtype=np.float64)
    with np.errstate(over="ignore", under="ignore"):  # handled below
        norm = float(np.linalg.norm(x))
    if 1e-150 < norm < math.inf:
        return x / norm
    big = float(np.abs(x).max()) if x.shape[0] else 0.0
    if not 0.0 < big < math.inf:
        return None
    x = x / big  # to [-1, 1] first: the norm of tiny or huge entries under- or overflows
    return x / float(np.linalg.norm(x))


_ID_RUN = 65_536
"""Tokens a batch holds as strings before it turns them into ids (bounds its memory)."""


@dataclass(frozen=True)
class TextViews:
    """What featurizing reads of a document by itself, without the vocabulary: its normalized
    tokens, and the encoder's unit vector of its text (None: no token the encoder knows, or
    not ``encoded`` yet: the featurizer then encodes it). Computed before the batch's
    featurizing (:func:`read_texts`), ahead of its turn or not."""

    tokens: list[str]
    vector: np.ndarray | None = None
    encoded: bool = True


def read_texts(
    tokenizer: Tokenizer, encoder: TextEncoder | None, docs: Sequence[DecodedDocument]
) -> list[TextViews]:
    """Each document's :class:`TextViews`: what :meth:`Featurizer.featurize` would compute of
    it, computed here instead (before the batch is featurized, e.g. on another thread while
    the model steps the batch before: it reads no state). ``encoder``: the featurizer's, when
    it keeps vectors (None: the views are not encoded, the featurizer encodes them);
    documents with their own embedding are not encoded."""
    if encoder is None:
        return [TextViews(_tokens_of(tokenizer, doc), encoded=False) for doc in docs]
    views = [TextViews(_tokens_of(tokenizer, doc)) for doc in docs]
    to_encode = [
        i for i, d in enumerate(docs)
        if d.embedding is None and (d.text is not None or d.tokens is not None)
    ]  # fmt: skip
    if to_encode:
        encoded, has = encoder.encode([_text_of(docs[i]) for i in to_encode])
        for row, i in enumerate(to_encode):
            if has[row]:
                views[i] = TextViews(views[i].tokens, encoded[row])
    return views


class Featurizer:
    """Turns decoded documents into a ``DocBatch``, growing the vocabulary as it goes.

    ``tokens`` wins over ``text``. Documents left with no tokens (including embedding-only ones)
    are not in the batch; their indices are returned so the caller can DLQ them as
    ``empty_content``. With ``embedding_dim`` (the vmf likelihood) documents are kept for their
    embedding instead (unit length, in ``batch.emb``), words or none, and those without a usable
    embedding are the empty ones. With ``context`` each document's categorical ``context``
    fields become reserved vocabulary entries (:func:`context_tokens`), in the batch's
    ``ctx_*`` arrays. With an ``encoder`` a document without its own embedding gets the
    encoder's vector of its text (or tokens); with ``words_view`` (the hybrid likelihood) a
    document is kept if it has words or its own embedding, its row zero when it has no vector:
    the encoder's vector of a text without words (punctuation, symbols) does not found a story.
    """

    def __init__(
        self,
        tokenizer: Tokenizer,
        vocabulary: Vocabulary,
        context: bool = False,
        embedding_dim: int = 0,
        encoder: TextEncoder | None = None,
        words_view: bool = False,
    ) -> None:
        self.tokenizer = tokenizer
        self.vocabulary = vocabulary
        self.context = context
        self.embedding_dim = embedding_dim  # > 0: documents are clustered by their embedding
        self.encoder = encoder
        self.words_view = words_view

    def vectors_of(
        self, docs: list[DecodedDocument], read: Sequence[TextViews] | None = None
    ) -> dict[int, np.ndarray]:
        """Each document's unit vector by index (its own embedding, else the encoder's of its
        text, or ``read``'s where it was encoded); documents with neither are left out."""
        vectors: dict[int, np.ndarray] = {}
        to_encode: list[int] = []
        for i, doc in enumerate(docs):
            if doc.embedding is not None:
                vec = unit_embedding(doc)
                if vec is not None:
                    vectors[i] = vec
            elif self.encoder is not None and (doc.text is not None or doc.tokens is not None):
                if read is None or not read[i].encoded:
                    to_encode.append(i)
                elif (pre := read[i].vector) is not None:
                    vectors[i] = pre
        if to_encode:
            texts = [_text_of(docs[i]) for i in to_encode]
            encoded, has = self.encoder.encode(texts)  # type: ignore[union-attr]
            for row, i in enumerate(to_encode):
                if has[row]:
                    vectors[i] = encoded[row]
        return vectors

    def tokens_of(self, doc: DecodedDocument) -> list[str]:
        """The normalized tokens of one document (empty if it has no text or tokens)."""
        return _tokens_of(self.tokenizer, doc)

    def featurize(
        self,
        docs: list[DecodedDocument],
        grow: bool = True,
        read: Sequence[TextViews] | None = None,
    ) -> tuple[DocBatch, list[int]]:
        """Batch of the documents with tokens (in order) and the indices of those without.

        With ``grow=False`` unknown words are dropped instead of added (read-only scoring), so a
        document of only unknown words is reported as empty. ``read``: the documents' tokens
        and encoded vectors computed ahead (:func:`read_texts`, with this featurizer's
        tokenizer and encoder); the batch is the same as without.
        """
        tokenize = self.tokenizer.tokenize
        normalize = self.tokenizer.normalize
        vocab = self.vocabulary
        # growing, every _ID_RUN tokens become ids (the same ids, in first-seen order): a batch
        # of long documents then holds its tokens as 8-byte ids, not as strings
        parts: list[np.ndarray] = []
        flat: list[str] = []
        lengths: list[int] = []
        kept: list[int] = []
        empty: list[int] = []
        vectors = self.vectors_of(docs, read) if self.embedding_dim else {}
        either = self.words_view
        for i, doc in enumerate(docs):
            if read is not None:
                toks = read[i].tokens
            elif doc.tokens is not None:
                toks = normalize(doc.tokens)
            elif doc.text is not None:
                toks = tokenize(doc.text)
            else:
                toks = []
            if either:  # words, or the document's own vector: the encoder's alone is no story
                keeps = bool(toks) or (i in vectors and doc.embedding is not None)
            else:
                keeps = i in vectors or bool(toks and not self.embedding_dim)
            if keeps:
                flat.extend(toks)
                if grow and len(flat) >= _ID_RUN:
                    parts.append(np.array(vocab.ids(flat), dtype=np.int64))
                    flat = []
                lengths.append(len(toks))
                kept.append(i)
            else:
                empty.append(i)
        if grow:
            batch = batch_from_flat(
                np.concatenate([*parts, np.array(vocab.ids(flat), dtype=np.int64)]),
                np.array(lengths, dtype=np.int64),
                len(vocab),
                vocab.reserved,
                vocab.dropped,
            )
            keep = kept
        else:
            get = vocab.get
            ids = np.array([-1 if (j := get(t)) is None else j for t in flat], dtype=np.int64)
            known = ids >= 0
            doc_of = np.repeat(np.arange(len(lengths)), lengths)
            new_len = np.bincount(doc_of[known], minlength=len(lengths))
            stays = new_len > 0
            if self.embedding_dim and not either:  # clustered by the vector; words describe
                stays[:] = True
            elif either:  # a text with words, all unknown, is scored by its vector
                stays |= np.array([kept[d] in vectors for d in range(len(kept))], dtype=bool)
            empty.extend(kept[d] for d in np.flatnonzero(~stays).tolist())
            empty.sort()
            keep = [kept[d] for d in np.flatnonzero(stays).tolist()]
            batch = batch_from_flat(
                ids[known], new_len[stays], len(vocab), vocab.reserved, vocab.dropped
            )
        if self.context:
            batch = self._with_context(batch, [docs[i] for i in keep], grow)
        if self.embedding_dim:
            emb = np.zeros((len(keep), self.embedding_dim))
            for d, i in enumerate(keep):
                if i in vectors:
                    emb[d] = vectors[i]
            batch = replace(batch, emb=emb)
        return batch, empty

    def _with_context(self, batch: DocBatch, docs: list[DecodedDocument], grow: bool) -> DocBatch:
        """``batch`` with its documents' context fields (in field-name order) as value and field
        entries, and each field's number of distinct values once they are counted."""
        vocab = self.vocabulary
        ptr = np.zeros(len(docs) + 1, dtype=np.int64)
        pairs: list[tuple[str, str, str]] = []
        for d, doc in enumerate(docs):
            for f in sorted(doc.context):
                value_tok, field_tok = context_tokens(f, doc.context[f])
                if grow or (value_tok in vocab and field_tok in vocab):
                    pairs.append((f, value_tok, field_tok))
            ptr[d + 1] = len(pairs)
        value_ids = vocab.ids([p[1] for p in pairs], grow)
        field_ids = vocab.ids([p[2] for p in pairs], grow)
        card = np.array([vocab.context_values(p[0]) for p in pairs], dtype=np.float64)
        return replace(
            batch,
            vocab_size=len(vocab),
            reserved=vocab.reserved,
            ctx_ptr=ptr,
            ctx_value=np.array(value_ids, dtype=np.int64),
            ctx_field=np.array(field_ids, dtype=np.int64),
            ctx_card=card,
        )


def _tokens_of(tokenizer: Tokenizer, doc: DecodedDocument) -> list[str]:
    """The normalized tokens of one document (empty if it has no text or tokens)."""
    if doc.tokens is not None:
        return tokenizer.normalize(doc.tokens)
    if doc.text is not None:
        return tokenizer.tokenize(doc.text)
    return []


def _text_of(doc: DecodedDocument) -> str:
    """What the encoder reads of a document: its text, or its tokens joined by spaces."""
    if doc.tokens is not None:
        return " ".join(doc.tokens)
    return doc.text or ""
