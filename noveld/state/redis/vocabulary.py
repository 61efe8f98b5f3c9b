"""The namespace's shared vocabulary in Redis: words get global ids by one atomic script, and
a compaction renumbers them all at once (writers holding old ids are then refused as stale)."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import redis

from noveld.models.suffstats import MultinomialStats
from noveld.state.base import NamespaceState, StaleVocabulary
from noveld.state.codec import encode_checkpoint
from noveld.state.redis.reader import Reader
from noveld.state.redis.reasons import StoreConflict, intern_error
from noveld.state.redis.values import text

#: seconds a compaction's staged vocabulary outlives a writer that died before its script ran
STAGING_TTL_S = 3600


class Vocabulary(Reader):
    """Intern words and compact the vocabulary."""

    def intern(self, state: NamespaceState, known: int, new_words: list[str]) -> list[str]:
        """Global ids for words this writer has not seen: returns the namespace's vocabulary
        from index ``known`` on (``new_words`` in order unless another writer added words
        meanwhile) and keeps ``state.vocab`` equal to it."""
        try:
            interned = self._intern(
                keys=[self.keys["vocab"], self.keys["vocab_idx"], self.keys["meta"]],
                args=[known, self.vocab_gen, *new_words],
            )
        except redis.exceptions.ResponseError as exc:
            refused = intern_error(str(exc))
            if refused is None:
                raise
            code, why = refused
            if code == "NOVELD_STALE":
                raise StaleVocabulary(f"namespace {self.namespace!r}: {why}") from exc
            if not self.has_state():
                raise self._lost() from exc  # the whole namespace went, not only its vocab
            raise StoreConflict(
                f"namespace {self.namespace!r}: {why} (its vocab key is gone or cut)"
            ) from exc
        tail = [text(w) for w in interned]
        del state.vocab[known:]
        state.vocab.extend(tail)
        return tail

    def compact_vocabulary(
        self,
        state: NamespaceState,
        stats: MultinomialStats,
        vocab: list[str],
        gone: np.ndarray,
        novelty: dict[str, Any],
    ) -> bool:
        """Stage the renumbered vocabulary, then swap it in with the renumbered statistics as
        the checkpoint, in one script that first checks that the namespace is where this
        writer's statistics are (no commit, word or compaction since); the log, in old ids, is
        trimmed and the generation moves on, so other writers reload (``stale``)."""
        k = self.keys
        listed, indexed = self.staging
        pipe = self.client.pipeline(transaction=False)
        pipe.unlink(listed, indexed)
        for i in range(0, len(vocab), 10_000):
            chunk = vocab[i : i + 10_000]
            pipe.rpush(listed, *chunk)
            pipe.hset(indexed, mapping={w: i + j for j, w in enumerate(chunk)})
        pipe.expire(listed, STAGING_TTL_S)
        pipe.expire(indexed, STAGING_TTL_S)
        pipe.execute()
        blob = encode_checkpoint(stats, {"seq": self.last_seq, "vocab": len(vocab)})
        names = ["meta", "ckpt", "log", "vocab", "vocab_idx"]
        done = self._compact(
            keys=[k[n] for n in names] + [listed, indexed, k["vocab_gone"], k["novelty"]],
            args=[
                self.last_seq,
                self.vocab_gen,
                len(state.vocab),
                len(vocab),
                blob,
                gone.astype("<u8").tobytes(),
                json.dumps(novelty, separators=(",", ":")),
            ],
        )
        if not int(done):
            return False
        self.vocab_gen += 1
        state.stats, state.vocab, state.vocab_gone, state.novelty = stats, vocab, gone, novelty
        state.vocab_checked = len(vocab)
        return True
