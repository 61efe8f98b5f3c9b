"""Story stage: a batch's change to the story summaries (noveld.models.stories), built from
the step's assignments with vectorised numpy, committed with the batch by the store.

Documents are bucketed by event time: the document's ``ts``, else the source's (a Kafka
record's timestamp), else the time this process handles the batch. Top terms are recomputed
lazily: when a cluster is first seen by this process and each time the documents it has seen
for it doubled (and at most :data:`TERMS_PER_BATCH` clusters per batch).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from noveld.daemon.settings import StoriesSettings
from noveld.daemon.stages.events import top_terms
from noveld.daemon.stages.live import LiveNamespace
from noveld.models.base import BatchResult, ClusterModel
from noveld.models.stories import StoriesChange, StoryLimits, batch_delta
from noveld.schema import Document, SourcePosition, parse_rfc3339

TERMS_PER_BATCH = 32
"""Clusters whose top terms one batch recomputes at most (the rest wait for a later batch)."""


def story_limits(settings: StoriesSettings) -> StoryLimits:
    """The bounds the settings give."""
    return StoryLimits(
        bucket_seconds=settings.bucket_seconds,
        buckets=settings.buckets,
        exemplars=settings.exemplars,
        terms=settings.terms,
        text_chars=settings.text_chars,
        exemplar_text=settings.exemplar_text,
        max_stories=settings.max_stories,
    )


def doc_times(
    docs: Sequence[Document], positions: Sequence[SourcePosition], now: float
) -> np.ndarray:
    """Each document's event time in epoch seconds (its ``ts``, the source's, else ``now``),
    to the millisecond."""
    ts = [d.ts for d in docs]
    if None in ts:
        for i, t in enumerate(ts):
            if t is None:
                pos_ts = positions[i].ts
                ts[i] = now if pos_ts is None else parse_rfc3339(pos_ts)
    return np.round(np.asarray(ts, dtype=np.float64), 3)


class StoryBuilder:
    """Builds one namespace's story changes; remembers, for this process only, which
    clusters' exemplars are complete and when each cluster's terms were last computed."""

    def __init__(
        self,
        settings: StoriesSettings,
        model: ClusterModel,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.enabled = settings.enabled
        self.limits = story_limits(settings)
        self.model = model
        self.clock = clock
        self._seen: dict[int, int] = {}  # uid → documents this process saw join it
        self._terms_at: dict[int, int] = {}  # uid → _seen when its terms were computed
        self._exemplars: dict[int, int] = {}  # uid → exemplars stored (as far as known)

    def load(self, stories: dict[str, Any]) -> None:
        """Start from the stored summaries (after a load or reload)."""
        self._seen, self._terms_at = {}, {}
        self._exemplars = {int(u): len(s["exemplars"]) for u, s in stories.items()}

    def change(
        self,
        live: LiveNamespace,
        docs: Sequence[Document],
        positions: Sequence[SourcePosition],
        result: BatchResult,
    ) -> StoriesChange | None:
        """The batch's change to the summaries (None when summaries are off)."""
        if not self.enabled:
            return None
        lim = self.limits
        uids = np.asarray(result.assignments, dtype=np.int64)
        want = {u for u in np.unique(uids).tolist() if self._exemplars.get(u, 0) < lim.exemplars}
        delta = batch_delta(
            uids,
            doc_times(docs, positions, self.clock()),
            [d.id for d in docs],
            [d.text for d in docs] if lim.exemplar_text else [None] * len(docs),
            lim,
            want,
        )
        budget = TERMS_PER_BATCH
        stats, vocab = live.state.stats, live.vocab
        for uid, s in delta.items():
            seen = self._seen.get(uid, 0) + s["docs"]
            self._seen[uid] = seen
            if s["exemplars"]:
                self._exemplars[uid] = self._exemplars.get(uid, 0) + len(s["exemplars"])
            due = uid not in self._terms_at or seen >= 2 * self._terms_at[uid]
            if due and budget > 0:
                budget -= 1
                self._terms_at[uid] = seen
                s["terms"] = [
                    [w, c] for w, c in top_terms(self.model, stats, vocab, uid, lim.terms)
                ]
        merges = [(u, into) for u, into, _ in result.merged]
        dropped = [u for u, _, _ in result.retired]
        for u in [*dropped, *(m for m, _ in merges)]:
            self._seen.pop(u, None)
            self._terms_at.pop(u, None)
            self._exemplars.pop(u, None)
        for _, into in merges:  # the survivor's terms: recomputed at its next document
            self._terms_at.pop(into, None)
        return StoriesChange(
            touched={str(u): s for u, s in delta.items()},
            merges=merges,
            dropped=dropped,
            limits=lim,
        )
