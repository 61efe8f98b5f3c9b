"""Long-document stage: documents past ``limits.max_doc_tokens`` tokens are cut to their first
that many tokens (``limits.oversize = "truncate"``, counted in the batch report) or
dead-lettered as ``oversize`` (``"dead-letter"``), so that a batch's memory and the model's
per-document work stay bounded whatever the input's article lengths. The tokens counted are
the featurizer's own (:func:`noveld.featurize.read_texts`): a document is tokenized once."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Literal

from noveld.connectors.jsonl import Record
from noveld.daemon.stages.decode import Rejections
from noveld.daemon.stages.report import BatchReport
from noveld.featurize import TextViews, Tokenizer, read_texts
from noveld.schema import DecodedDocument, InvalidReason

Oversize = Literal["truncate", "dead-letter"]


def cut_text(text: str, tokenizer: Tokenizer, limit: int) -> str:
    """``text`` up to the start of its token ``limit + 1`` (its first ``limit`` tokens, the
    characters between them kept as they were)."""
    kept = 0
    for match in re.compile(tokenizer.pattern).finditer(text):  # re caches the compiled pattern
        if match.end() - match.start() < tokenizer.min_token_len:
            continue
        if kept == limit:
            return text[: match.start()].rstrip()
        kept += 1
    return text


def cut(doc: DecodedDocument, tokenizer: Tokenizer, limit: int) -> DecodedDocument:
    """The document with its first ``limit`` tokens only (text or pre-tokenized tokens)."""
    if doc.tokens is not None:
        return dataclasses.replace(doc, tokens=tokenizer.normalize(doc.tokens)[:limit])
    assert doc.text is not None  # it has more than ``limit`` tokens, so it has text
    return dataclasses.replace(doc, text=cut_text(doc.text, tokenizer, limit))


def limit_length(
    docs: list[DecodedDocument],
    kept: list[Record],
    read: Sequence[TextViews],
    tokenizer: Tokenizer,
    limit: int,
    oversize: Oversize,
    rejects: Rejections,
    rep: BatchReport,
) -> tuple[list[DecodedDocument], list[Record], list[TextViews]]:
    """The batch's documents with none longer than ``limit`` tokens, their records and their
    text views (``read``: each document's, from the featurizer's tokenizing pass): the longer
    ones cut (``rep.truncated`` counts them; their views are read again from the cut text,
    not yet encoded) or rejected as ``oversize``."""
    if all(len(v.tokens) <= limit for v in read):
        return docs, kept, list(read)
    out_docs: list[DecodedDocument] = []
    out_kept: list[Record] = []
    out_read: list[TextViews] = []
    for doc, rec, views in zip(docs, kept, read, strict=True):
        n = len(views.tokens)
        if n > limit:
            if oversize == "dead-letter":
                detail = f"{n:,} tokens, more than limits.max_doc_tokens ({limit:,})"
                rejects.reject(rec, InvalidReason.OVERSIZE, detail, rep)
                continue
            doc = cut(doc, tokenizer, limit)
            views = read_texts(tokenizer, None, [doc])[0]
            rep.truncated += 1
        out_docs.append(doc)
        out_kept.append(rec)
        out_read.append(views)
    return out_docs, out_kept, out_read
