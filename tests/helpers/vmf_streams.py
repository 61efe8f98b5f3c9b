"""Embedding-only batches and synthetic vMF streams shared by the vmf test modules."""

from __future__ import annotations

import numpy as np

from noveld.models.base import DocBatch
from noveld.models.vmf import VMFConfig, VMFMixture
from noveld.synth import SynthConfig, generate


def emb_batch(x: np.ndarray, vocab_size: int) -> DocBatch:
    """A batch of embedding-only documents (no words)."""
    nb = x.shape[0]
    none = np.zeros(0, dtype=np.int64)
    return DocBatch(np.zeros(nb + 1, dtype=np.int64), none, none, np.zeros(nb, dtype=np.int64),
                    vocab_size, vocab_size, emb=x)  # fmt: skip


def synthetic(n: int, p: int, cosine: float, seed: int = 0) -> tuple[list[np.ndarray], list[str]]:
    cfg = SynthConfig(n_docs=n, n_stories=25, embedding_dim=p, embedding_cosine=cosine, seed=seed)
    recs = list(generate(cfg))
    return [np.array(r["embedding"]) for r in recs], [r["label"] for r in recs]


def model_and_batches(
    embs: list[np.ndarray], batch_size: int = 64, **cfg: float | int | bool
) -> tuple[VMFMixture, list[DocBatch]]:
    p = embs[0].shape[0]
    model = VMFMixture(VMFConfig(dimension=p, **cfg))  # type: ignore[arg-type]
    model.bind_dimension_words(list(range(p)), list(range(p, 2 * p)))
    batches = []
    for i in range(0, len(embs), batch_size):
        x = np.array(embs[i : i + batch_size])
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        batches.append(emb_batch(x, 2 * p))
    return model, batches
