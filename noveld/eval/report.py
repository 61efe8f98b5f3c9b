"""``noveld evaluate``: run the real pipeline over a labelled file in order and score it.

Clustering is scored on each document's assignment at the time it was emitted (strictly online);
novelty is scored from the ``cluster.born`` events the pipeline actually emitted (DESIGN §11).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from noveld.daemon.embedded import CollectingEvents, run_file
from noveld.daemon.settings import Settings
from noveld.eval.metrics import clustering_scores
from noveld.eval.novelty import novelty_scores
from noveld.models.dpmm import warm_up
from noveld.schema import Document, SourcePosition


@dataclass
class StreamRecorder:
    """Batch observer keeping (doc id, label, cluster uid, offset) in stream order."""

    ids: list[str] = field(default_factory=list)
    labels: list[str | None] = field(default_factory=list)
    clusters: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)

    def __call__(
        self, docs: list[Document], positions: list[SourcePosition], assignments: np.ndarray
    ) -> None:
        """Record one batch."""
        self.ids.extend(d.id for d in docs)
        self.labels.extend(d.label for d in docs)
        self.clusters.extend(int(a) for a in assignments)
        self.offsets.extend(p.offset for p in positions)


def run_and_record(
    settings: Settings,
    path: str,
    progress_out: IO[str] | None = None,
) -> tuple[StreamRecorder, list[dict[str, Any]], float, int]:
    """Run the pipeline in memory over ``path``; return the record, events, seconds, exit code."""
    rec = StreamRecorder()
    sink = CollectingEvents()
    warm_up()  # docs/s measures clustering, not the one-off JIT compilation of a first run
    t0 = time.perf_counter()
    code, _, _ = run_file(
        settings, path, events_sink=sink, observer=rec, progress_out=progress_out, snapshot=False
    )
    return rec, sink.events, time.perf_counter() - t0, code


def score(
    rec: StreamRecorder, events: list[dict[str, Any]], seconds: float, window: int = 5
) -> dict[str, Any]:
    """The DESIGN §11 report from a recorded run."""
    keep = [i for i, lab in enumerate(rec.labels) if lab is not None]
    labels = [str(rec.labels[i]) for i in keep]
    preds = [rec.clusters[i] for i in keep]
    out: dict[str, Any] = dict(clustering_scores(labels, preds)) if keep else {}
    index_of_id = {rec.ids[i]: j for j, i in enumerate(keep)}
    index_of_offset = {rec.offsets[i]: j for j, i in enumerate(keep)}
    births: list[tuple[int, int]] = []
    for ev in events:
        if ev.get("type") != "cluster.born":
            continue
        f = index_of_id.get(ev["founding_doc_id"])
        c = index_of_offset.get(ev["confirmed_at"]["offset"])
        if f is not None and c is not None:
            births.append((f, c))
    out.update(novelty_scores(labels, births, window=window))
    out["clusters"] = len(set(preds))
    out["docs"] = len(rec.ids)
    out["unlabelled_docs"] = len(rec.ids) - len(keep)
    out["seconds"] = round(seconds, 4)
    out["docs_per_second"] = round(len(rec.ids) / seconds, 1) if seconds > 0 else 0.0
    return out


def evaluate_file(
    settings: Settings,
    path: str,
    window: int = 5,
    progress_out: IO[str] | None = None,
    on_done: Callable[[StreamRecorder], None] | None = None,
) -> dict[str, Any]:
    """Run and score one labelled JSONL file."""
    rec, events, seconds, _ = run_and_record(settings, path, progress_out)
    if on_done is not None:
        on_done(rec)
    return score(rec, events, seconds, window)
