"""Long-document stage: documents past ``limits.max_doc_tokens`` tokens are cut to their first
that many tokens (``limits.oversize = "truncate"``, counted in the batch report) or
dead-lettered as ``oversize`` (``"dead-letter"``), so that a batch's memory and the model's
per-document work stay bounded whatever the input's article lengths."""

from __future__ import annotations

import re
from typing import Literal

from noveld.connectors.jsonl import Record
from noveld.daemon.stages.decode import Rejections
from noveld.daemon.stages.report import BatchReport
from noveld.featurize import Tokenizer
from noveld.schema import Document, InvalidReason

Oversize = Literal["truncate", "dead-letter"]


def token_count(doc: Document, tokenizer: Tokenizer, limit: int) -> int:
    """The document's tokens as the featurizer counts them, exactly when they may be more than
    ``limit`` (a text of at most ``limit`` characters has at most ``limit`` tokens: it is not
    tokenized here)."""
    if doc.tokens is not None:
        return len(doc.tokens) if len(doc.tokens) <= limit else len(tokenizer.normalize(doc.tokens))
    if doc.text is None or len(doc.text) <= limit:
        return 0
    return len(tokenizer.tokenize(doc.text))


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


def cut(doc: Document, tokenizer: Tokenizer, limit: int) -> Document:
    """The document with its first ``limit`` tokens only (text or pre-tokenized tokens)."""
    if doc.tokens is not None:
        return doc.model_copy(update={"tokens": tokenizer.normalize(doc.tokens)[:limit]})
    assert doc.text is not None  # token_count found tokens, so there is text
    return doc.model_copy(update={"text": cut_text(doc.text, tokenizer, limit)})


def limit_length(
    docs: list[Document],
    kept: list[Record],
    tokenizer: Tokenizer,
    limit: int,
    oversize: Oversize,
    rejects: Rejections,
    rep: BatchReport,
) -> tuple[list[Document], list[Record]]:
    """The batch's documents with none longer than ``limit`` tokens, and their records: the
    longer ones cut (``rep.truncated`` counts them) or rejected as ``oversize``."""
    out_docs: list[Document] = []
    out_kept: list[Record] = []
    for doc, rec in zip(docs, kept, strict=True):
        n = token_count(doc, tokenizer, limit)
        if n > limit:
            if oversize == "dead-letter":
                detail = f"{n:,} tokens, more than limits.max_doc_tokens ({limit:,})"
                rejects.reject(rec, InvalidReason.OVERSIZE, detail, rep)
                continue
            doc = cut(doc, tokenizer, limit)
            rep.truncated += 1
        out_docs.append(doc)
        out_kept.append(rec)
    return out_docs, out_kept
