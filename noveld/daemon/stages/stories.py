"""Story stage: a batch's change to the story summaries (noveld.models.story_table), built
from the step's assignments with vectorised numpy, committed with the batch by the store.

Documents are bucketed by event time: the document's ``ts``, else the source's (a Kafka
record's timestamp), else the time this process handles the batch. Top terms are recomputed
lazily and within a time budget: a cluster is due once it has :data:`TERMS_MIN_DOCS`
documents, and again each time that count doubled since this process computed them; the
largest due clusters go first, while the time spent stays under :data:`TERMS_SHARE` of the
time elapsed.
"""

from __future__ import annotations

import operator
import time
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import Any

import numpy as np

from noveld.daemon.settings import StoriesSettings
from noveld.daemon.stages.events import top_terms
from noveld.daemon.stages.live import LiveNamespace
from noveld.models.base import BatchResult, ClusterModel
from noveld.models.stories import StoryLimits
from noveld.models.story_table import StoriesChange, StoryTable, batch_change
from noveld.schema import DecodedDocument, SourcePosition, parse_rfc3339

TERMS_SHARE = 0.005
"""Share of the processing time spent recomputing top terms at most (each recomputation walks
the statistics' postings pool); the rest waits for later batches."""

TERMS_MIN_DOCS = 3
"""Documents a cluster needs (as seen by this process) before its top terms are computed."""


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


class _Field(Sequence[Any]):
    """One field of a batch's documents, read only for the few documents asked for (the
    exemplars)."""

    def __init__(
        self, docs: Sequence[DecodedDocument], get: Callable[[DecodedDocument], Any]
    ) -> None:
        self._docs, self._get = docs, get

    def __len__(self) -> int:
        return len(self._docs)

    def __getitem__(self, i: int) -> Any:  # type: ignore[override]
        return self._get(self._docs[i])


_TS = operator.attrgetter("ts")
_ID = operator.attrgetter("id")
_TEXT = operator.attrgetter("text")


def doc_times(
    docs: Sequence[DecodedDocument], positions: Sequence[SourcePosition], now: float
) -> np.ndarray:
    """Each document's event time in epoch seconds (its ``ts``, the source's, else ``now``),
    to the millisecond."""
    own = list(map(_TS, docs))
    missing = own.count(None)
    # one source per batch: a file's positions carry no time at all, a Kafka record's always
    # one; looking at the ends spares reading every position of a file's batch
    if missing == len(own) and positions[0].ts is None and positions[-1].ts is None:
        return np.full(len(own), round(now, 3))
    ts = np.array(own, dtype=np.float64)  # None → NaN (a document's ts is finite)
    if missing:
        idx = np.flatnonzero(np.isnan(ts))
        ts[idx] = source_times(list(map(_TS, map(positions.__getitem__, idx.tolist()))), now)
    return np.round(ts, 3)


_STAMP = len("1970-01-01T00:00:00.000Z")
"""Length of the Kafka source's timestamps (``format_rfc3339``: milliseconds, ``Z``)."""


def source_times(stamps: Sequence[str | None], now: float) -> np.ndarray:
    """Epoch seconds of sources' RFC 3339 timestamps (``now`` for None): in the Kafka
    source's own form all parsed by numpy at once, else one by one (``parse_rfc3339``)."""
    out = np.full(len(stamps), float(now))
    arr = np.array(stamps, dtype=object)
    has = np.flatnonzero(arr != None)  # noqa: E711 (elementwise)
    if has.shape[0] == 0:
        return out
    text = arr[has].astype(str)
    if (
        (np.char.str_len(text) == _STAMP).all()
        and (np.char.find(text, "T") == 10).all()
        and np.char.endswith(text, "Z").all()
    ):
        try:
            ms = text.astype(f"U{_STAMP - 1}").astype("datetime64[ms]").astype(np.int64)
        except ValueError:  # e.g. a leap second: parse_rfc3339 takes it, numpy does not
            pass
        else:
            out[has] = ms / 1000.0
            return out
    out[has] = [parse_rfc3339(s) for s in text.tolist()]
    return out


class StoryBuilder:
    """Builds one namespace's story changes; remembers, for this process only, which
    clusters' exemplars are complete and when each cluster's terms were last computed."""

    def __init__(
        self,
        settings: StoriesSettings,
        model: ClusterModel,
        clock: Callable[[], float] = time.time,
        timer: Callable[[], float] = time.thread_time,
    ) -> None:
        self.enabled = settings.enabled
        self.limits = story_limits(settings)
        self.model = model
        self.clock = clock  # documents without a time of their own get this one
        self.timer = timer  # measures the terms' budget (CPU time: fair on a busy machine)
        self._terms_at: dict[int, int] = {}  # uid → its documents when its terms were computed
        self._exemplars: dict[int, int] = {}  # uid → exemplars stored (as far as known)
        self._budget = 0.0  # seconds the terms may still take
        self._since = timer()

    def load(self, stories: StoryTable) -> None:
        """Start from the stored summaries (after a load or reload)."""
        self._terms_at = {}
        self._exemplars = {u: len(e) for u, e in stories.exemplars.items()}

    def change(
        self,
        live: LiveNamespace,
        docs: Sequence[DecodedDocument],
        positions: Sequence[SourcePosition],
        result: BatchResult,
    ) -> StoriesChange | None:
        """The batch's change to the summaries (None when summaries are off)."""
        if not self.enabled:
            return None
        lim = self.limits
        uids = np.asarray(result.assignments, dtype=np.int64)
        full = self._exemplars
        change = batch_change(
            uids,
            doc_times(docs, positions, self.clock()),
            _Field(docs, _ID),
            _Field(docs, _TEXT),
            lim,
            full,
        )
        for u, ex in change.exemplars.items():
            full[u] = full.get(u, 0) + len(ex)
        self._terms(live, change)
        change.merges = [(u, into) for u, into, _ in result.merged]
        change.dropped = [u for u, _, _ in result.retired]
        for u in [*change.dropped, *(m for m, _ in change.merges)]:
            self._terms_at.pop(u, None)
            full.pop(u, None)
        for _, into in change.merges:  # the survivor's terms: due again
            self._terms_at.pop(into, None)
        return change

    def _terms(self, live: LiveNamespace, change: StoriesChange) -> None:
        """Fresh top terms for the due clusters the time budget allows: those with at least
        :data:`TERMS_MIN_DOCS` documents (as the state's summaries count them) whose count
        doubled since their terms were computed, the largest first."""
        now = self.timer()
        self._budget = min(self._budget + TERMS_SHARE * (now - self._since), 1.0)
        self._since = now
        if self._budget <= 0:
            return
        table, at = live.state.stories, self._terms_at
        uids = change.uids.tolist()
        rows = table.rows_of(uids)
        known = rows >= 0
        docs = change.docs.copy()
        docs[known] += table.docs[rows[known]]
        stale = np.fromiter(map(at.get, uids, repeat(0)), np.int64, len(uids))
        due = np.flatnonzero((docs >= TERMS_MIN_DOCS) & (docs >= 2 * stale))
        stats, vocab, n = live.state.stats, live.vocab, self.limits.terms
        for i in due[np.argsort(-docs[due], kind="stable")].tolist():
            if self._budget <= 0:
                break
            t0 = self.timer()
            u = uids[i]
            change.terms[u] = [[w, c] for w, c in top_terms(self.model, stats, vocab, u, n)]
            at[u] = int(docs[i])
            self._budget -= self.timer() - t0
