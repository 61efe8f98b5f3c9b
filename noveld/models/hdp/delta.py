"""What one ``hdp`` batch adds to the pool, as an additive :class:`StatsDelta`, and which of
its categories are births."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from noveld.models.base import DocBatch, StatsDelta
from noveld.models.dpmm.delta import delta_from_entries
from noveld.models.hdp.topics import TOPIC_SLOT
from noveld.models.suffstats import MultinomialStats


def batch_births(
    born_local: list[int],
    assign_local: np.ndarray,
    tab_doc: np.ndarray,
    tab_k: np.ndarray,
    open_tables: np.ndarray,
    cat_uid: np.ndarray,
) -> list[tuple[int, int, float]]:
    """(uid, founding document, score) of the categories opened in this batch: the first
    document it is the category of, else the first with a table serving it. The score is
    the share of the batch's tables the new category serves (no single seating margin
    exists when a document's words may sit at several tables)."""
    out: list[tuple[int, int, float]] = []
    n_tables = max(int(open_tables.shape[0]), 1)
    for k in born_local:
        docs = np.flatnonzero(assign_local == k)
        serving = open_tables[tab_k[open_tables] == k]
        d = int(docs[0]) if docs.shape[0] else int(tab_doc[serving].min())
        out.append((int(cat_uid[k]), d, float(serving.shape[0]) / n_tables))
    return sorted(out, key=lambda b: b[1])


def batch_delta(
    batch: DocBatch,
    tokens: np.ndarray,
    tok_y: np.ndarray,
    tok_cat_uid: np.ndarray,
    tab_uids: np.ndarray,
    f: float,
    born: list[tuple[int, int, float]],
    n_docs: int,
    ctx_uids: np.ndarray,
    topic_words: np.ndarray,
    extra: tuple[np.ndarray, ...] | None = None,
) -> StatsDelta:
    """Additions of one batch: per token, +1 to (topic y, word) and to (category, topic
    y's entry); +1 table per open table to its category's ``m``; per context field of a
    document, +1 to (its category, the value's entry) and (its category, the field's); and
    ``extra`` (uids, entries, counts): the vectors' parts (:meth:`CategoryVectors.entries`)."""
    n_tok = tokens.shape[0]
    topic_uids = (TOPIC_SLOT << 40) | tok_y.astype(np.int64)  # topic_uid, vectorised
    unit_uids = np.concatenate([tab_uids, topic_uids, tok_cat_uid]).astype(np.int64)
    unit_m = np.concatenate([np.ones(tab_uids.shape[0]), np.zeros(2 * n_tok)])
    unit_n = np.concatenate([np.zeros(tab_uids.shape[0]), np.ones(2 * n_tok)])
    ctx_cat = np.zeros(0, dtype=np.int64)
    ctx_words = np.zeros(0, dtype=np.int64)
    if batch.ctx_ptr is not None and batch.ctx_value is not None and batch.ctx_field is not None:
        per_doc = np.repeat(ctx_uids, np.diff(batch.ctx_ptr))
        ctx_cat = np.concatenate([per_doc, per_doc])
        ctx_words = np.concatenate([batch.ctx_value, batch.ctx_field])
    none = np.zeros(0, dtype=np.int64)
    ex_uids, ex_words, ex_counts = extra if extra is not None else (none, none, np.zeros(0))
    e_uids = np.concatenate([topic_uids, tok_cat_uid, ctx_cat, ex_uids]).astype(np.int64)
    e_words = np.concatenate([tokens, topic_words[tok_y], ctx_words, ex_words]).astype(np.int64)
    n_ones = e_uids.shape[0] - len(ex_counts)
    delta = delta_from_entries(
        batch,
        unit_uids,
        unit_m,
        unit_n,
        e_uids,
        e_words,
        np.concatenate([np.ones(n_ones), np.asarray(ex_counts, dtype=np.float64)]),
        f,
        born,
        [],
        [],
        MultinomialStats(),
    )
    return replace(delta, n_docs=n_docs)
