"""Dense unit vectors from text, computed on this machine: a static-vector encoder.

The built-in encoder reads the WordLlama ``l2_supercat`` files that the ``wordllama`` wheel ships
(a 32,000 × 256 float16 token table trained for truncation, and its BPE tokenizer) with
``safetensors`` and ``tokenizers``, without importing ``wordllama`` itself: that module
configures the root logger when imported and looks for its tokenizer in a folder the wheel does
not ship. A document's vector is the mean of its tokens' rows, truncated to ``dimension``
columns, scaled to unit length. Nothing is fetched over the network.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Protocol

import numpy as np

from noveld.featurize.pooling import mean_unit_rows

WORDLLAMA_MODEL = "wordllama/l2_supercat"
WORDLLAMA_DIMENSIONS = (64, 128, 256)
_WEIGHTS = "weights/l2_supercat_256.safetensors"
_TOKENIZER = "tokenizers/l2_supercat_tokenizer_config.json"
_TENSOR = "embedding.weight"


class EncoderUnavailable(RuntimeError):
    """The encoder's files cannot be found or read (the package is not installed)."""


class TextEncoder(Protocol):
    """Text to unit vectors: what any local encoder plugs in as."""

    @property
    def model_id(self) -> str:
        """Names the model and its dimension; part of the namespace's fingerprint."""

    @property
    def dimension(self) -> int:
        """Length of the vectors."""

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``(vectors, has_vector)``: a ``(len(texts), dimension)`` float64 array of unit rows,
        and which texts had any token (the others' rows are zero: they have no direction)."""


def _package_dir(name: str) -> Path:
    """Where an installed package's files are, without importing (running) the package."""
    spec = find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise EncoderUnavailable(
            f"the {name!r} package is not installed: pip install {name} "
            "(or choose --featurizer words)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True)
class TokenIds:
    """The token ids of a batch of texts, flat, with ``bounds[i]:bounds[i + 1]`` for text i."""

    ids: np.ndarray
    bounds: np.ndarray


class StaticVectors:
    """The mean of static token vectors, truncated to ``dimension`` columns (Matryoshka)."""

    def __init__(self, dimension: int = 256, root: Path | None = None) -> None:
        if dimension not in WORDLLAMA_DIMENSIONS:
            raise ValueError(
                f"the built-in encoder's dimension is one of {WORDLLAMA_DIMENSIONS}, "
                f"not {dimension}"
            )
        try:
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EncoderUnavailable(
                f"the built-in encoder needs the {exc.name!r} package: pip install "
                "wordllama safetensors tokenizers (or choose --featurizer words)"
            ) from exc

        base = root if root is not None else _package_dir("wordllama")
        try:
            table = load_file(str(base / _WEIGHTS))[_TENSOR]
            tokenizer = Tokenizer.from_file(str(base / _TOKENIZER))
        except (OSError, KeyError, ValueError) as exc:
            raise EncoderUnavailable(
                f"cannot read the encoder's files under {base}: {exc}"
            ) from exc
        tokenizer.no_padding()
        tokenizer.no_truncation()
        self._tokenizer = tokenizer
        self._table = np.ascontiguousarray(table[:, :dimension], dtype=np.float32)
        self._dimension = dimension

    @property
    def model_id(self) -> str:
        """``wordllama/l2_supercat@<dimension>``."""
        return f"{WORDLLAMA_MODEL}@{self._dimension}"

    @property
    def dimension(self) -> int:
        """Length of the vectors (64, 128 or 256)."""
        return self._dimension

    def token_ids(self, texts: Sequence[str]) -> TokenIds:
        """The texts' BPE token ids (no special tokens), flat (``encode_batch_fast``: the same
        ids, without the character offsets nothing here reads)."""
        encodings = self._tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encodings), np.int64, len(encodings))
        bounds = np.zeros(len(encodings) + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        ids = np.fromiter((i for e in encodings for i in e.ids), np.int64, int(bounds[-1]))
        return TokenIds(ids, bounds)

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Unit mean vectors of the texts, and which texts had a token."""
        tokens = self.token_ids(texts)
        out = np.zeros((len(texts), self._dimension), dtype=np.float64)
        mean_unit_rows(self._table, tokens.ids, tokens.bounds, out)
        return out, tokens.bounds[1:] > tokens.bounds[:-1]

    @property
    def table(self) -> np.ndarray:
        """The truncated token table (read-only use: tests and the reference)."""
        return self._table


@cache
def shared_encoder(dimension: int) -> StaticVectors:
    """The built-in encoder at ``dimension``, loaded once per process, at its first use."""
    return StaticVectors(dimension)
