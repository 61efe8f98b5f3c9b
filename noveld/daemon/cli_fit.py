"""``noveld fit``: bootstrap a namespace from an archive.

The archive goes through the same streaming pass as ``noveld run`` (in memory, its events
discarded: an archive's stories are not news), then collapsed Gibbs sweeps over *all* its
documents refine the pass's clusters (:mod:`noveld.models.refine`; blocked for the hybrid,
:mod:`~noveld.models.refine_hybrid`; paper 002's site-by-site sweeps for the EDCM,
:mod:`~noveld.models.refine_edcm`), and the refined state is
written into an empty ``--state-dir`` or Redis namespace, where ``noveld run`` continues from it.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from noveld.daemon.embedded import run_file
from noveld.daemon.errors import UserError
from noveld.daemon.exits import EXIT_INTERRUPTED, EXIT_OK
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import Settings
from noveld.daemon.signals import graceful_stop
from noveld.daemon.startup import default_store, refuse_a_file_as_state_dir
from noveld.eval.metrics import clustering_scores
from noveld.models.base import BatchResult, DocBatch
from noveld.models.dpmm import DPMM
from noveld.models.edcm import EDCMMixture
from noveld.models.hybrid import HybridMixture
from noveld.models.kernels import multinomial as kern
from noveld.models.refine import forgetting_weights, partition_stats, refine_partition
from noveld.models.refine_edcm import refine_edcm_partition
from noveld.models.refine_hybrid import refine_hybrid_partition, with_vector_entries
from noveld.schema import DecodedDocument, SourcePosition
from noveld.state.base import NamespaceState
from noveld.state.dir_lock import StateDirBusy, hold_state_dir
from noveld.state.memory import SNAPSHOT_NAME, write_snapshot

DEFAULT_SWEEPS = 5


class PassStopped(RuntimeError):
    """The archive's pass ended early (circuit breaker, signal): nothing is written."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _ArchiveRecorder:
    """Keeps what the refinement needs of every batch of the pass: the featurized documents,
    their clusters, whether a known label fixes them, and the merges of later batches."""

    def __init__(self, use_labels: bool) -> None:
        self.use_labels = use_labels
        self.batches: list[DocBatch] = []
        self.uids: list[np.ndarray] = []
        self.labels: list[str | None] = []
        self.merged_into: dict[int, int] = {}

    def on_documents(
        self, docs: list[DecodedDocument], positions: list[SourcePosition], assignments: np.ndarray
    ) -> None:
        """Batch observer: the documents' labels (for the report and for known labels)."""
        self.labels.extend(d.label for d in docs)

    def on_model(self, batch: DocBatch, result: BatchResult) -> None:
        """Model observer: the batch's features and clusters; merges remap earlier documents."""
        self.batches.append(batch)
        self.uids.append(result.assignments.copy())
        for src, dst, _ in result.merged:
            self.merged_into[int(src)] = int(dst)

    def final_uids(self) -> np.ndarray:
        """Each document's cluster at the end of the pass (merges of later batches applied)."""
        out = np.concatenate(self.uids) if self.uids else np.zeros(0, dtype=np.int64)
        into = self.merged_into
        for i, u in enumerate(out.tolist()):
            while u in into:
                u = into[u]
            out[i] = u
        return out

    def archive(self, vocab_size: int) -> DocBatch:
        """All documents of the pass as one batch (word ids are the namespace's)."""
        ptr = [np.zeros(1, dtype=np.int64)]
        offset = 0
        for b in self.batches:
            ptr.append(b.ptr[1:] + offset)
            offset += int(b.ptr[-1])
        last = self.batches[-1]
        emb = None  # the vectors (hybrid): zero rows for the documents without one
        if any(b.emb is not None for b in self.batches):
            p = next(b.emb for b in self.batches if b.emb is not None).shape[1]
            emb = np.concatenate(
                [np.zeros((len(b), p)) if b.emb is None else b.emb for b in self.batches]
            )
        return DocBatch(
            ptr=np.concatenate(ptr),
            words=np.concatenate([b.words for b in self.batches]).astype(np.int64),
            counts=np.concatenate([b.counts for b in self.batches]),
            lengths=np.concatenate([b.lengths for b in self.batches]),
            vocab_size=vocab_size,
            reserved=last.reserved,  # the hybrid's dimension entries are not words of the prior
            emb=emb,
        )

    def fixed(self) -> np.ndarray:
        """Documents a known label keeps in its category."""
        return np.array([self.use_labels and lab is not None for lab in self.labels], np.bool_)


class _DiscardedEvents:
    """Event sink of the pass: the archive's events are not news; counted, not kept."""

    def __init__(self) -> None:
        self.count = 0

    def publish(self, events: Sequence[dict[str, Any]]) -> None:
        """Count."""
        self.count += len(events)


def _target(settings: Settings) -> str:
    """Where the fitted state goes; refuses a target that already holds state."""
    if settings.redis.url is not None:
        from noveld.state.redis.store import RedisStore

        store = default_store(settings)
        assert isinstance(store, RedisStore)
        if store.read() is not None:
            raise UserError(
                f"namespace {settings.namespace!r} already holds state; fit into a new "
                "namespace (noveld fit never overwrites state)"
            )
        return f"Redis namespace {settings.namespace!r}"
    if settings.state.dir is None:
        raise UserError("noveld fit needs --state-dir DIR or --redis-url URL to write the state to")
    refuse_a_file_as_state_dir(settings.state.dir)
    try:
        with hold_state_dir(settings.state.dir):  # a run holding it: refused now, not after
            _refuse_filled(settings.state.dir)  # the pass and the sweeps (the write holds it
    except StateDirBusy as exc:  # again and checks again)
        raise UserError(str(exc)) from exc
    return str(settings.state.dir)


def _refuse_filled(state_dir: Path) -> None:
    if (state_dir / SNAPSHOT_NAME).exists():
        raise UserError(
            f"{state_dir} already holds state; fit into an empty directory "
            "(noveld fit never overwrites state)"
        )


def _nmi(labels: list[str | None], uids: np.ndarray) -> float | None:
    """NMI of the clusters on the documents that carry a label (None if none do)."""
    keep = [i for i, lab in enumerate(labels) if lab is not None]
    if not keep:
        return None
    return float(clustering_scores([labels[i] for i in keep], uids[keep].tolist())["nmi"])


def fit_archive(
    settings: Settings, path: str, sweeps: int, progress_out: IO[str] | None
) -> dict[str, Any]:
    """The pass, the sweeps and the write; returns the report."""
    m = settings.model
    if m.kind != "dpmm" or m.likelihood not in ("multinomial", "hybrid", "edcm"):
        raise UserError(
            "noveld fit refines the dpmm model with the multinomial, hybrid or edcm likelihood; "
            f"for --model {m.kind} --likelihood {m.likelihood}, warm start with `noveld run "
            "--input ARCHIVE` into the state (docs/operations.md, 'Warm start from an archive')"
        )
    if path == "-" or not Path(path).is_file():
        raise UserError(f"archive {path} is not a file (noveld fit reads a JSONL file)")
    where = _target(settings)
    in_memory = settings.model_copy(
        update={
            "dlq": settings.dlq_path(),
            # the sweeps revisit every document's word ids: they must not be renumbered
            "state": settings.state.model_copy(update={"dir": None, "compact_vocabulary_at": 0}),
            "redis": settings.redis.model_copy(update={"url": None}),
        }
    )
    rec = _ArchiveRecorder(m.use_labels)
    sink = _DiscardedEvents()

    def observe_model(pipeline: Pipeline) -> None:
        pipeline.model_observer = rec.on_model

    t0 = time.perf_counter()
    code, progress, pipeline = run_file(
        in_memory,
        path,
        None,
        progress_out,
        sink,
        rec.on_documents,
        False,
        observe_model,
        breaker_advice=f"The invalid records are in {in_memory.dlq_path()}; fix the archive (or "
        "raise --max-consecutive-invalid), then fit again.",
    )
    if code != EXIT_OK:
        raise PassStopped(code, f"the pass over {path} stopped (above); nothing was written")
    if progress.stopped:
        raise PassStopped(EXIT_INTERRUPTED, "stopped by a signal; nothing was written")
    if not rec.batches:
        raise UserError(f"{path} holds no valid document; nothing was written")
    t1 = time.perf_counter()
    model = pipeline.model
    assert isinstance(model, DPMM)
    stats = pipeline.state.stats
    batch = rec.archive(len(pipeline.vocab))
    before = rec.final_uids()
    say = progress_out.write if progress_out is not None else (lambda _: 0)
    say(
        f"noveld fit: pass over {len(batch):,} documents done ({t1 - t0:.1f} s, "
        f"{np.unique(before).shape[0]:,} clusters); {sweeps} sweeps over all of them\n"
    )

    with graceful_stop() as stop:

        def on_sweep(i: int, moved: int, clusters: int) -> None:
            end = "; converged" if moved == 0 and m.deterministic else ""
            say(
                f"noveld fit: sweep {i + 1}/{sweeps}: {moved:,} moved, {clusters:,} clusters{end}\n"
            )
            if stop.is_set():  # SIGINT/SIGTERM: after the sweep under way, nothing written
                raise PassStopped(
                    EXIT_INTERRUPTED,
                    f"stopped by a signal after sweep {i + 1}; nothing was written",
                )

        log_alpha, fixed = model.log_alpha(settings.batch.max_docs), rec.fixed()
        next_uid, rng = int(stats.ictl[kern.NEXT_UID]), np.random.default_rng([m.seed, sweeps])
        if isinstance(model, HybridMixture):  # blocked: the hybrid kernel's gram is block²
            refined = refine_hybrid_partition(
                batch, before, model.config, log_alpha, sweeps, fixed, next_uid, rng, on_sweep
            )
        elif isinstance(model, EDCMMixture):  # the EDCM's sites, shapes re-solved as they move
            refined = refine_edcm_partition(
                model, batch, before, log_alpha, sweeps, fixed, next_uid, rng, on_sweep
            )
        else:
            refined = refine_partition(
                batch, before, model.config, log_alpha, sweeps, fixed, next_uid, rng, on_sweep
            )
    t2 = time.perf_counter()
    state = _fitted_state(pipeline, batch, refined.uids, refined.next_uid)
    _write(settings, state)
    report: dict[str, Any] = {
        "docs": len(batch),
        "clusters_after_pass": int(np.unique(before).shape[0]),
        "clusters": int(state.stats.active_slots().shape[0]),
        "moved_per_sweep": refined.moved,
        "events_discarded": sink.count,
        "invalid_records": progress.invalid,
        "pass_seconds": round(t1 - t0, 3),
        "sweep_seconds": round(t2 - t1, 3),
        "target": where,
    }
    nmi_before, nmi_after = _nmi(rec.labels, before), _nmi(rec.labels, refined.uids)
    if nmi_before is not None and nmi_after is not None:
        report["nmi_after_pass"], report["nmi"] = round(nmi_before, 4), round(nmi_after, 4)
    return report


def _fitted_state(
    pipeline: Pipeline, batch: DocBatch, uids: np.ndarray, next_uid: int
) -> NamespaceState:
    """The namespace after the fit: the refined clusters' statistics (each document weighted as
    forgetting would have left it), the pass's vocabulary, offsets and counters; no pending
    novelty candidates (the pass's were of clusters the sweeps reshaped)."""
    settings, model = pipeline.settings, pipeline.model
    assert isinstance(model, DPMM)
    passed = pipeline.state
    weights = forgetting_weights(len(batch), settings.model.half_life_docs)
    if isinstance(model, HybridMixture):  # the vectors' resultants on the dimension entries
        batch = with_vector_entries(batch, *model.dimension_ids())
    elif isinstance(model, EDCMMixture):  # what the store counts: document frequencies
        batch, _ = model.edcm_view(batch)
    stats, _ = partition_stats(batch, uids, next_uid, weights)
    stats.ictl[kern.DOCS_SEEN] = passed.stats.ictl[kern.DOCS_SEEN]
    stats.ictl[kern.STEPS] = passed.stats.ictl[kern.STEPS]
    model.prune(stats, frozenset(pipeline.known_labels))  # faded or beyond the bound: gone
    alive = set(stats.uid[stats.active_slots()].tolist())
    counters = dict(passed.counters)
    counters["clusters"] = counters.get("clusters", 0) + next_uid - int(passed.stats.ictl[3])
    novelty = {
        "candidates": [],
        "dropped": 0,
        "announced": sorted(u for u in pipeline.announced if u in alive),
        "known": {str(u): lab for u, lab in sorted(pipeline.known_labels.items()) if u in alive},
        # the archive's checksum: `noveld run --input ARCHIVE` on the state checks it is the same
        **({"inputs": dict(pipeline.inputs)} if pipeline.inputs else {}),
    }
    return NamespaceState(
        fingerprint=passed.fingerprint,
        stats=stats,
        vocab=pipeline.vocab.to_list(),
        novelty=novelty,
        offsets=dict(passed.offsets),
        counters=counters,
    )


def _write(settings: Settings, state: NamespaceState) -> None:
    """Into the empty target, checked again as it is written: another process may have filled
    it since the start."""
    uidnext = {"0": int(state.stats.ictl[kern.NEXT_UID])}
    if settings.redis.url is not None:
        from noveld.state.redis.reasons import StoreConflict
        from noveld.state.redis.store import RedisStore

        store = default_store(settings)
        assert isinstance(store, RedisStore)
        try:
            store.import_state(state, [], uidnext)  # refuses a namespace that holds state
        except StoreConflict as exc:
            raise UserError(str(exc)) from exc
        return
    assert settings.state.dir is not None
    try:
        with hold_state_dir(settings.state.dir):  # no run may start on it meanwhile
            _refuse_filled(settings.state.dir)
            write_snapshot(settings.state.dir / SNAPSHOT_NAME, state, [], uidnext)
    except StateDirBusy as exc:
        raise UserError(str(exc)) from exc


def _cmd_fit(ns: argparse.Namespace, settings_of: Callable[[argparse.Namespace], Settings]) -> int:
    if ns.sweeps < 0:
        raise UserError(f"--sweeps must be >= 0, got {ns.sweeps}")
    settings = settings_of(ns)
    progress = None if ns.quiet else sys.stderr
    try:
        report = fit_archive(settings, str(ns.input), ns.sweeps, progress)
    except PassStopped as exc:
        sys.stderr.write(f"noveld fit: {exc}\n")
        return exc.code
    if ns.json:
        import json

        print(json.dumps(report, indent=2, sort_keys=True))
    elif progress is not None:
        nmi = f", NMI {report['nmi_after_pass']} → {report['nmi']}" if "nmi" in report else ""
        progress.write(
            f"noveld fit: {report['docs']:,} documents, {report['clusters_after_pass']:,} → "
            f"{report['clusters']:,} clusters{nmi}; state written to {report['target']}. "
            "Continue with noveld run on the same state (and the same model settings).\n"
        )
    return 0


def add_fit_command(
    sub: Any,
    add_common: Callable[[argparse.ArgumentParser], None],
    settings_of: Callable[[argparse.Namespace], Settings],
) -> None:
    """Register ``noveld fit``."""
    fit = sub.add_parser(
        "fit",
        help="bootstrap a namespace from an archive: the streaming pass, then Gibbs sweeps",
        description="Cluster an archive (a JSONL file, in stream order) with the streaming "
        "pass of noveld run, then refine the clusters with collapsed Gibbs sweeps over all of "
        "its documents at once (paper 004's sampler, started from the pass), and write the "
        "state into an EMPTY --state-dir or Redis namespace; noveld run then continues from "
        "it (same model settings). The archive's events are not emitted. dpmm with the "
        "multinomial, hybrid or edcm likelihood (edcm: paper 002's site-by-site refinement, "
        "docs/model.md); the archive's features (and vectors) are held in memory.",
    )
    fit.add_argument("input", help="archive: JSONL file in stream order")
    fit.add_argument(
        "--sweeps",
        type=int,
        default=DEFAULT_SWEEPS,
        help=f"Gibbs sweeps over the whole archive after the pass (default {DEFAULT_SWEEPS})",
    )
    fit.add_argument("--state-dir", type=Path, help="empty directory for the state snapshot")
    fit.add_argument("--redis-url", help="Redis to write the state to (an empty --namespace)")
    fit.add_argument("--dlq", type=Path, help="dead-letter file for the archive's bad records")
    fit.add_argument("--json", action="store_true", help="print the report as JSON on stdout")
    fit.add_argument("--quiet", "-q", action="store_true", help="no progress on stderr")
    add_common(fit)
    fit.set_defaults(func=lambda ns: _cmd_fit(ns, settings_of))
