"""What one batch step reports, and the two ways a step stops: the invalid-record breaker and
a store that no longer matches the in-memory model."""

from __future__ import annotations

from dataclasses import dataclass, field

from noveld.state.base import CommitOutcome


@dataclass
class BatchReport:
    """What one step did (for progress output and metrics)."""

    records: int = 0
    valid: int = 0
    invalid: int = 0
    truncated: int = 0  # documents cut to limits.max_doc_tokens tokens (limits.oversize)
    births: int = 0
    model_births: int = 0
    retired: int = 0
    merged: int = 0
    outbox_pending: int = 0
    events_refused: int = 0  # events dropped since the start because no broker takes them
    held_for_replicas: bool = False  # the pending events wait for Redis replicas to catch up
    replayed: bool = False
    clusters_active: int = 0
    vocabulary: int = 0  # entries of the namespace's vocabulary (words; hdp's own entries)
    vocabulary_compacted: bool = False  # the vocabulary was compacted in this step
    log_predictive_per_token: float = float("nan")
    stage_seconds: dict[str, float] = field(default_factory=dict)
    invalid_reasons: dict[str, int] = field(default_factory=dict)
    invalid_details: dict[str, str] = field(default_factory=dict)  # reason → its last detail


class CircuitOpen(RuntimeError):
    """Too many invalid records in a row: stop rather than dead-letter a whole stream."""

    def __init__(self, message: str, report: BatchReport) -> None:
        super().__init__(message)
        self.report = report


class StateDiverged(RuntimeError):
    """A shared store refused a commit (fenced, already applied, or its vocabulary compacted
    by another writer): the in-memory model no longer matches it, so this process must reload
    (or stop)."""

    def __init__(self, message: str, outcome: CommitOutcome, lease_refusal: str = "") -> None:
        super().__init__(message)
        self.outcome = outcome
        self.lease_refusal = lease_refusal  # why the writer lease refused, '' if it did not
