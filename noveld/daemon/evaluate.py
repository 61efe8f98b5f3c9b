"""``noveld evaluate``: run the real pipeline over a labelled file in order and score it.

Clustering is scored on each document's assignment at the time it was emitted (strictly online);
novelty is scored from the ``cluster.born`` events the pipeline actually emitted.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO, Any

import numpy as np

from noveld.daemon.embedded import run_file
from noveld.daemon.exits import EXIT_CIRCUIT_OPEN, EXIT_INTERRUPTED, EXIT_OK
from noveld.daemon.settings import Settings
from noveld.daemon.sinks import CollectingEvents
from noveld.eval.metrics import clustering_scores
from noveld.eval.novelty import novelty_scores
from noveld.models.dpmm import warm_up
from noveld.models.edcm import warm_up_edcm
from noveld.schema import DecodedDocument, SourcePosition

BREAKER_ADVICE = (
    "Nothing is scored: fix the file, or raise --max-consecutive-invalid to score its valid "
    "documents only."
)
"""What follows the circuit breaker's message in ``evaluate`` (no DLQ to read, no resuming)."""


class RunStopped(RuntimeError):
    """The evaluated run ended before its input did (circuit breaker, signal, an I/O error,
    each said on stderr): a score of part of the file would pass for the whole one's."""

    def __init__(self, code: int, invalid_why: str = "") -> None:
        why = {
            EXIT_CIRCUIT_OPEN: "the circuit breaker opened (too many invalid records in a row"
            + (f"; {invalid_why}" if invalid_why else "")
            + "). "
            + BREAKER_ADVICE,
            EXIT_INTERRUPTED: "interrupted by a signal; nothing is scored.",
        }.get(code, f"the run stopped (exit {code}, said above); nothing is scored.")
        super().__init__(why)
        self.code = code


@dataclass
class StreamRecorder:
    """Batch observer keeping (doc id, label, cluster uid, offset) in stream order."""

    ids: list[str] = field(default_factory=list)
    labels: list[str | None] = field(default_factory=list)
    clusters: list[int] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    invalid: int = 0  # records the pipeline dead-lettered (not scored)
    invalid_why: str = ""  # their commonest reason (Progress.dominant_reason)

    def __call__(
        self, docs: list[DecodedDocument], positions: list[SourcePosition], assignments: np.ndarray
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
    """Run the pipeline in memory over ``path``; return the record, events, seconds, exit code
    (EXIT_INTERRUPTED when a signal stopped it before the end)."""
    rec = StreamRecorder()
    sink = CollectingEvents()
    warm_up()  # docs/s measures clustering, not the one-off JIT compilation of a first run
    if settings.model.likelihood == "edcm":
        warm_up_edcm()
    t0 = time.perf_counter()
    code, progress, _ = run_file(
        settings,
        path,
        events_sink=sink,
        observer=rec,
        progress_out=progress_out,
        snapshot=False,
        breaker_advice=BREAKER_ADVICE,
        tail_fate="an incomplete line, not scored",
    )
    rec.invalid = progress.invalid
    rec.invalid_why = progress.dominant_reason()
    if code == EXIT_OK and progress.stopped:
        code = EXIT_INTERRUPTED
    return rec, sink.events, time.perf_counter() - t0, code


def score(
    rec: StreamRecorder, events: list[dict[str, Any]], seconds: float, window: int = 5
) -> dict[str, Any]:
    """The clustering and novelty report from a recorded run."""
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
    out["invalid_records"] = rec.invalid
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
    """Run and score one labelled JSONL file (:class:`RunStopped` if the run ended early)."""
    rec, events, seconds, code = run_and_record(settings, path, progress_out)
    if code != EXIT_OK:
        raise RunStopped(code, rec.invalid_why)
    if on_done is not None:
        on_done(rec)
    return score(rec, events, seconds, window)


def evaluate_known(
    settings: Settings,
    path: str,
    known_fraction: float,
    seed: int,
    window: int = 5,
    progress_out: IO[str] | None = None,
) -> dict[str, Any]:
    """Semi-supervised evaluation (paper 000's protocol).

    Half of the classes (chosen with ``seed``) are known; ``known_fraction`` of their documents
    keep their label in the stream the model sees (known categories), every other document is
    stripped of it. Reported on the unrevealed documents: ``known_f1`` (macro F1 over the known
    classes, a document's prediction being the known label of its cluster, if any), ``nmi`` and
    ``ari`` (all classes), and novelty on the novel classes' documents.
    """
    import json
    import tempfile
    from pathlib import Path

    from noveld.connectors.decode import DecodeLimits, FieldNames, decode_record
    from noveld.daemon.model_kinds import dense_dimension
    from noveld.daemon.pipeline import label_uid
    from noveld.eval.novelty import known_f1, split_known
    from noveld.schema import DecodedDocument

    # the truth as the pipeline reads it: a null label is no label, an invalid one (a boolean,
    # a float) makes an invalid record, left in the stream to be dead-lettered and not scored
    fields = FieldNames(**settings.fields.model_dump())
    vectors = settings.model.likelihood in ("vmf", "hybrid")
    limits = DecodeLimits(
        max_doc_bytes=settings.limits.max_doc_bytes,
        embedding_dim=dense_dimension(settings.model) if vectors else None,
    )
    raw_lines = Path(path).read_bytes().splitlines()
    labelled: list[tuple[int, str, str]] = []  # (line, doc id, label)
    for n, line in enumerate(raw_lines):
        doc = decode_record(line, fields, limits)
        if isinstance(doc, DecodedDocument) and doc.label is not None:
            labelled.append((n, doc.id, doc.label))
    truth_by_id = {doc_id: label for _, doc_id, label in labelled}
    known, revealed_mask = split_known([lab for _, _, lab in labelled], known_fraction, seed)
    revealed_ids = {doc_id for (_, doc_id, _), r in zip(labelled, revealed_mask, strict=True) if r}
    hide = {n for n, doc_id, _ in labelled if doc_id not in revealed_ids}
    with tempfile.TemporaryDirectory() as tmp:
        stream = Path(tmp) / "stream.jsonl"
        with open(stream, "wb") as fh:
            for n, line in enumerate(raw_lines):
                if n in hide:  # the same document without its label (non-ASCII kept as is)
                    obj = json.loads(line.decode("utf-8-sig"))
                    obj.pop(settings.fields.label)
                    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()
                fh.write(line + b"\n")
        on = settings.model_copy(
            update={"model": settings.model.model_copy(update={"use_labels": True})}
        )
        rec, events, seconds, code = run_and_record(on, str(stream), progress_out)
    if code != EXIT_OK:
        raise RunStopped(code, rec.invalid_why)
    label_of_uid = {label_uid(c): c for c in known}
    hidden = [i for i, doc_id in enumerate(rec.ids) if doc_id not in revealed_ids]
    hidden = [i for i in hidden if rec.ids[i] in truth_by_id]
    true = [truth_by_id[rec.ids[i]] for i in hidden]
    preds = [rec.clusters[i] for i in hidden]
    out: dict[str, Any] = dict(clustering_scores(true, preds)) if hidden else {}
    out["known_f1"] = known_f1(
        true, [label_of_uid.get(p) for p in preds], known, [True] * len(true)
    )
    novel = [j for j, t in enumerate(true) if t not in known]
    novel_pos = {rec.ids[hidden[j]]: n for n, j in enumerate(novel)}
    offset_pos = {rec.offsets[hidden[j]]: n for n, j in enumerate(novel)}
    births: list[tuple[int, int]] = []
    for ev in events:
        if ev.get("type") != "cluster.born":
            continue
        f = novel_pos.get(ev["founding_doc_id"])
        c = offset_pos.get(ev["confirmed_at"]["offset"])
        if f is not None:
            births.append((f, c if c is not None and c >= f else f))
    out.update(novelty_scores([true[j] for j in novel], births, window=window))
    out["known_classes"] = len(known)
    out["revealed_docs"] = len(revealed_ids)
    out["scored_docs"] = len(hidden)
    out["unlabelled_docs"] = sum(1 for doc_id in rec.ids if doc_id not in truth_by_id)
    out["invalid_records"] = rec.invalid
    out["clusters"] = len(set(preds))
    out["docs"] = len(rec.ids)
    out["seconds"] = round(seconds, 4)
    out["docs_per_second"] = round(len(rec.ids) / seconds, 1) if seconds > 0 else 0.0
    return out
