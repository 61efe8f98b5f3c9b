"""The stream itself: documents assembled chunk by chunk, as records or as JSON lines."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from noveld.synth.config import SynthConfig
from noveld.synth.draws import polya_repeats, sample_vmf
from noveld.synth.seeded import CHUNK, FloatArray, IntArray, streams
from noveld.synth.stories import Sequencer, Stories
from noveld.synth.words import pseudo_words

_START_MS = 1_700_000_000_000  # 2023-11-14T22:13:20Z, the first document's timestamp

Chunk = tuple[int, IntArray, npt.NDArray[np.int64], list[str], list[str] | None, FloatArray | None]


def _chunks(cfg: SynthConfig) -> Iterator[Chunk]:
    """(first stream index, story ids, timestamps in ms, texts, sources or None) for successive
    chunks."""
    rngs = streams(cfg.seed)
    home = rngs["source"].integers(0, max(cfg.n_sources, 1), cfg.n_stories)
    words = pseudo_words(cfg.vocab_size, rngs["vocab"])
    word_arr = np.array(words, dtype=object)
    stories = Stories(cfg, rngs["stories"])
    seq = Sequencer(cfg, rngs)
    means: FloatArray | None = None
    if cfg.embedding_dim:
        p = cfg.embedding_dim
        means = rngs["embedding"].standard_normal((cfg.n_stories, p))
        means /= np.linalg.norm(means, axis=1, keepdims=True)
        c = cfg.embedding_cosine
        kappa = (c * p - c**3) / (1.0 - c * c)  # paper 003 eq. 10
    ms = _START_MS
    for start in range(0, cfg.n_docs, CHUNK):
        n = min(CHUNK, cfg.n_docs - start)
        story = seq.next(n)
        lengths = np.maximum(rngs["length"].poisson(cfg.doc_len_mean, n), 2).astype(np.int64)
        tok_story = np.repeat(story, lengths)
        m = len(tok_story)
        ids = stories.sample(
            tok_story, rngs["component"].random(m), rngs["pick"].random(m), rngs["residual"]
        )
        if cfg.burstiness > 0:
            ids = polya_repeats(ids, lengths, cfg.burstiness, rngs["burst"])
        toks: list[str] = word_arr[ids].tolist()
        ends = np.cumsum(lengths).tolist()
        begins = [0, *ends[:-1]]
        texts = [" ".join(toks[a:b]) for a, b in zip(begins, ends, strict=True)]
        gaps = 1 + np.floor(rngs["gap"].exponential(999.0, n)).astype(np.int64)
        stamps = ms + np.cumsum(gaps)
        ms = int(stamps[-1])
        sources = None
        if cfg.n_sources > 0:
            u = rngs["source"].random(n)
            other = rngs["source"].integers(0, cfg.n_sources, n)
            src = np.where(u < cfg.source_fidelity, home[story], other)
            sources = [f"src{j}" for j in src.tolist()]
        emb = None if means is None else sample_vmf(means[story], kappa, rngs["embedding"])
        yield start, story, stamps, texts, sources, emb


def generate(cfg: SynthConfig) -> Iterator[dict[str, Any]]:
    """Yield ``{"id", "text", "label", "ts"}`` records (and ``context`` with ``n_sources``,
    ``embedding`` with ``embedding_dim``) in stream order, deterministic per seed."""
    for start, story, stamps, texts, sources, emb in _chunks(cfg):
        for j, (k, ms, text) in enumerate(zip(story.tolist(), stamps.tolist(), texts, strict=True)):
            rec: dict[str, Any] = {
                "id": f"d{start + j:06d}",
                "text": text,
                "label": f"s{k}",
                "ts": ms / 1000,
            }
            if sources is not None:
                rec["context"] = {"source": sources[j]}
            if emb is not None:
                rec["embedding"] = _rounded(emb[j])
            yield rec


def write_jsonl(cfg: SynthConfig, path_or_stream: str | os.PathLike[str] | IO[str]) -> int:
    """Write the stream as JSON lines (same records as ``generate``) and return the count.

    A path is created/overwritten (UTF-8); a text stream is written to and left open. Lines are
    formatted directly (ids, labels and pseudo-words never need JSON escaping) and are identical
    to ``json.dumps(record)``.
    """
    if isinstance(path_or_stream, (str, os.PathLike)):
        with Path(path_or_stream).open("w", encoding="utf-8", newline="\n") as fh:
            return _write(cfg, fh)
    return _write(cfg, path_or_stream)


def _rounded(x: FloatArray) -> list[float]:
    """An embedding as JSON-friendly floats (6 decimals: files stay small, directions exact
    to ~1e-6)."""
    return [round(v, 6) for v in x.tolist()]


def _write(cfg: SynthConfig, out: IO[str]) -> int:
    n = 0
    for start, story, stamps, texts, sources, emb in _chunks(cfg):
        ctx = [""] * len(texts) if sources is None else [
            f', "context": {{"source": "{x}"}}' for x in sources
        ]  # fmt: skip
        if emb is not None:
            ctx = [
                f'{c}, "embedding": {json.dumps(_rounded(e))}'
                for c, e in zip(ctx, emb, strict=True)
            ]
        lines = [
            f'{{"id": "d{start + j:06d}", "text": "{text}", "label": "s{k}", '
            f'"ts": {ms / 1000!r}{ctx[j]}}}\n'
            for j, (k, ms, text) in enumerate(
                zip(story.tolist(), stamps.tolist(), texts, strict=True)
            )
        ]
        out.write("".join(lines))
        n += len(lines)
    return n
