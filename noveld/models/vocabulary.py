"""The vocabulary: a growing word ↔ id map that is part of the model state, and the reserved
entries (context values, embedding dimensions, hdp topics) that are never input tokens.

A leaf module: the featurizer fills it, the models and the state stores read it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from hashlib import blake2b

import numpy as np

#: vocabulary entries starting with this are the model's own (hdp topics, context values),
#: never input tokens
RESERVED_PREFIX = "\x00"
CONTEXT_PREFIX = RESERVED_PREFIX + "ctx/"  # a context value: CONTEXT_PREFIX + field + SEP + value
CONTEXT_FIELD_PREFIX = RESERVED_PREFIX + "ctxf/"  # a context field's total: prefix + field
CONTEXT_SEP = "\x1f"
DIMENSION_PREFIX = RESERVED_PREFIX + "vmf/"  # an embedding dimension's part (vmf)
#: entries whose counts are not tokens of a document, so not in a cluster's token mass
UNCOUNTED_PREFIXES = (CONTEXT_PREFIX, CONTEXT_FIELD_PREFIX, DIMENSION_PREFIX)


def uncounted_ids(vocab: list[str]) -> np.ndarray:
    """Ids of the vocabulary's context and embedding-dimension entries (a scan of the
    vocabulary: asked when forgetting prunes, a few times per half-life)."""
    return np.array(
        [i for i, w in enumerate(vocab) if w.startswith(UNCOUNTED_PREFIXES)], dtype=np.int64
    )


def context_tokens(field: str, value: str) -> tuple[str, str]:
    """The vocabulary entries of one context observation: (its value's, its field's)."""
    return f"{CONTEXT_PREFIX}{field}{CONTEXT_SEP}{value}", f"{CONTEXT_FIELD_PREFIX}{field}"


def word_hashes(words: Iterable[str]) -> np.ndarray:
    """Stable 64-bit hashes of words (BLAKE2b), in order: how a vocabulary remembers the words
    it compacted out in 8 bytes each (two words share a hash with probability ~n²/2⁶⁵:
    negligible, and it would only make V one word short)."""
    digests = b"".join(
        blake2b(w.encode("utf-8", "surrogatepass"), digest_size=8).digest() for w in words
    )
    return np.frombuffer(digests, dtype=">u8").astype(np.uint64)


def _merge_sorted(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted unique union of a sorted unique array and any array (timsort merges runs)."""
    both = np.concatenate([a, np.sort(b)])
    both.sort(kind="stable")
    keep = np.ones(both.shape[0], dtype=np.bool_)
    keep[1:] = both[1:] != both[:-1]
    out: np.ndarray = both[keep]
    return out


def _without(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Sorted array ``a`` without the values of (small) ``b``."""
    at = np.searchsorted(a, b)
    hit = at < a.shape[0]
    hit[hit] = a[at[hit]] == b[hit]
    out: np.ndarray = np.delete(a, at[hit])
    return out


class Vocabulary:
    """Growing word ↔ id map; ids are dense, assigned in first-seen order.

    Part of the model state: the same stream in the same order always yields the same ids.
    :meth:`compacted` renumbers it over the words still in use and remembers the others by
    hash (``gone``), so that V — every word ever seen, what the prior's Vβ counts — stays
    exact: ``len(self) + dropped``, a returning word counted once.
    """

    def __init__(self, gone: np.ndarray | None = None) -> None:
        self._index: dict[str, int] = {}
        self._words: list[str] = []
        # hashes of the words compacted out that were not in use when it happened (sorted)
        self.gone: np.ndarray = np.zeros(0, np.uint64) if gone is None else gone
        self._returned: list[int] = []  # ids of the words whose hash is in ``gone`` (ascending)
        # the first ``checked`` words were all in use at the last compaction, so none of them is
        # in ``gone``: only the words added since need hashing when the vocabulary is loaded
        self.checked = 0
        self.reserved = 0  # entries that are not words (hdp topics, context values and fields)
        self._values_of: dict[str, int] = {}  # context field -> distinct values seen

    @property
    def dropped(self) -> int:
        """Words seen once but not in the id space now (compacted out, not seen again)."""
        return int(self.gone.shape[0]) - len(self._returned)

    def __len__(self) -> int:
        return len(self._words)

    def _note_returning(self, start: int) -> None:
        """Remember which words with ids ≥ ``start`` are remembered as gone (seen again after a
        compaction): they are counted in V once, as ids."""
        gone, words = self.gone, self._words[start:]
        if not gone.shape[0] or not words:
            return
        hashes = word_hashes(words)
        at = np.minimum(np.searchsorted(gone, hashes), gone.shape[0] - 1)  # gone is sorted
        self._returned += (np.flatnonzero(gone[at] == hashes) + start).tolist()

    def _count(self, word: str, sign: int) -> None:
        """Keep the reserved-entry and per-field value counts as words come and go."""
        if word.startswith(RESERVED_PREFIX):
            self.reserved += sign
            if word.startswith(CONTEXT_PREFIX):
                f = word[len(CONTEXT_PREFIX) :].split(CONTEXT_SEP, 1)[0]
                self._values_of[f] = self._values_of.get(f, 0) + sign

    def reserved_ids(self) -> list[int]:
        """Ids of the entries that are not words (a scan: for rare maintenance, not per batch)."""
        if not self.reserved:
            return []
        return [i for i, w in enumerate(self._words) if w.startswith(RESERVED_PREFIX)]

    def context_values(self, field: str) -> int:
        """How many distinct values of context ``field`` the vocabulary holds."""
        return self._values_of.get(field, 0)

    def __contains__(self, word: object) -> bool:
        return word in self._index

    def get(self, word: str) -> int | None:
        """Id of ``word``, or None if unknown."""
        return self._index.get(word)

    def word(self, i: int) -> str:
        """The word with id ``i`` (IndexError if out of range)."""
        if i < 0:
            raise IndexError(f"word id must be >= 0, got {i}")
        return self._words[i]

    def ids(self, tokens: list[str], grow: bool = True) -> list[int]:
        """Ids of ``tokens``; new words are added when ``grow``, else unknown tokens are dropped."""
        index = self._index
        if not grow:
            return [index[t] for t in tokens if t in index]
        before = len(index)
        out = [index.setdefault(t, len(index)) for t in tokens]
        if len(index) != before:  # new ids were handed out in first-seen order
            words = self._words
            for t in tokens:
                if index[t] == len(words):
                    words.append(t)
                    if t.startswith(RESERVED_PREFIX):
                        self._count(t, 1)
            self._note_returning(before)
        return out

    def extend(self, words: Iterable[str]) -> None:
        """Append words with the next ids (words another writer of the namespace added)."""
        n = len(self._words)
        for w in words:
            if w in self._index:
                raise ValueError(f"word already in the vocabulary: {w!r}")
            self._index[w] = len(self._words)
            self._words.append(w)
            self._count(w, 1)
        self._note_returning(n)

    def words_since(self, n: int) -> list[str]:
        """The words with ids ≥ ``n``, in id order."""
        return self._words[n:]

    def truncate(self, n: int) -> None:
        """Forget the words with ids ≥ ``n`` (ids handed out locally but not yet shared)."""
        for w in self._words[n:]:
            del self._index[w]
            self._count(w, -1)
        self._returned = [i for i in self._returned if i < n]
        self.checked = min(self.checked, n)
        del self._words[n:]

    def compacted(self, kept: np.ndarray) -> Vocabulary:
        """The vocabulary of the words with ids ``kept`` (ascending), renumbered ``0..`` in
        that order; the others are remembered as gone (a hash per word going)."""
        keep = np.zeros(len(self._words), dtype=np.bool_)
        keep[kept] = True
        words = [self._words[i] for i in kept.tolist()]
        dead = [w for w, k in zip(self._words, keep.tolist(), strict=True) if not k]
        gone = _merge_sorted(self.gone, word_hashes(dead))
        back = [self._words[i] for i in self._returned if keep[i]]  # gone once, in use again
        if back:
            gone = _without(gone, word_hashes(back))
        return Vocabulary.from_list(words, gone, checked=len(words))

    def to_list(self) -> list[str]:
        """Words in id order (a copy), for snapshots."""
        return list(self._words)

    @classmethod
    def from_list(
        cls, words: Iterable[str], gone: np.ndarray | None = None, checked: int = 0
    ) -> Vocabulary:
        """Rebuild from ``to_list()`` output (and ``gone``); word ``i`` gets id ``i``. The
        first ``checked`` words are known not to be gone ones come back (:attr:`checked`);
        the others are hashed to find those."""
        vocab = cls(gone)
        vocab._words = list(words)
        vocab._index = dict(zip(vocab._words, range(len(vocab._words)), strict=True))
        if len(vocab._index) != len(vocab._words):
            dup = next(w for w, n in Counter(vocab._words).items() if n > 1)
            raise ValueError(f"duplicate word in vocabulary list: {dup!r}")
        for w in [w for w in vocab._words if w.startswith(RESERVED_PREFIX)]:
            vocab._count(w, 1)
        vocab.checked = min(max(checked, 0), len(vocab._words))
        vocab._note_returning(vocab.checked)
        return vocab
