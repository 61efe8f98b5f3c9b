"""Top terms of a story read from a stored state alone, without the model that wrote it (the
view of a namespace whose daemon runs elsewhere): a cluster's word counts with the reserved
entries (context, vmf dimensions, edcm length bins) left out, and hdp's topic entries spread
over their topics' words, as :meth:`noveld.models.hdp.HDP.term_weights` does."""

from __future__ import annotations

import numpy as np

from noveld.daemon.stages.events import TERM_CHARS
from noveld.models.hdp import topic_uid
from noveld.models.hdp.topics import TOPIC_PREFIX
from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import RESERVED_PREFIX


def _shortened(term: str) -> str:
    return term if len(term) <= TERM_CHARS else term[: TERM_CHARS - 1] + "…"


class StoredTerms:
    """``terms(uid, n)`` over one state's statistics and vocabulary."""

    def __init__(self, stats: MultinomialStats, vocab: list[str]) -> None:
        self.stats = stats
        self.vocab = vocab

    def _word(self, w: int) -> str:
        return self.vocab[w] if 0 <= w < len(self.vocab) else ""

    def weights(self, uid: int) -> dict[int, float]:
        """Word id → count for live story ``uid`` (hdp topics expanded)."""
        stats = self.stats
        slot = stats.slot_of(uid)
        if slot < 0:
            return {}
        ws, cs = stats.word_counts(slot)
        acc: dict[int, float] = {}
        for w, c in zip(ws.tolist(), cs.tolist(), strict=True):
            word = self._word(int(w))
            if word.startswith(TOPIC_PREFIX):
                tslot = stats.slot_of(topic_uid(int(word[len(TOPIC_PREFIX) :])))
                if tslot < 0:
                    continue
                tws, tcs = stats.word_counts(tslot)
                total = float(tcs.sum())
                if total <= 0:
                    continue
                for x, share in zip(tws.tolist(), (c * tcs / total).tolist(), strict=True):
                    acc[int(x)] = acc.get(int(x), 0.0) + share
            elif word and not word.startswith(RESERVED_PREFIX):
                acc[int(w)] = acc.get(int(w), 0.0) + float(c)
        return acc

    def __call__(self, uid: int, n: int) -> list[tuple[str, float]]:
        """The ``n`` heaviest words with their share of the story's tokens (ties in word
        order, as in ``cluster.born`` events)."""
        acc = self.weights(uid)
        total = float(sum(acc.values()))
        if total <= 0 or n <= 0:
            return []
        counts = np.fromiter(acc.values(), np.float64, len(acc))
        if len(acc) > n:
            cut = np.partition(counts, len(acc) - n)[len(acc) - n]
            items = [(w, c) for w, c in acc.items() if c >= cut]
        else:
            items = list(acc.items())
        top = sorted((-c, self._word(w)) for w, c in items)[:n]
        return [(_shortened(w), round(-c / total, 6)) for c, w in top]
