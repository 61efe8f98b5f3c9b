"""Commit stage: one batch's offsets, model delta, events and counters applied atomically by
the store, and what a refused or overtaken commit means for the in-memory model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from noveld.daemon.stages.live import LiveNamespace
from noveld.daemon.stages.report import BatchReport, StateDiverged
from noveld.models.base import StatsDelta
from noveld.models.story_table import StoriesChange
from noveld.state.base import CommitOutcome, CommitRequest, StateStore, births_among

#: the checksum of an input's lines before an offset (``JsonlSource.checksum_at``)
InputChecksum = Callable[[str, int], int | None]


@dataclass(frozen=True)
class Committed:
    """What the store did with a batch: its answer, whether another writer's compaction made
    the store load the namespace afresh, and the events it left out (announced elsewhere)."""

    outcome: CommitOutcome
    moved: bool
    suppressed: set[str]


def note_inputs(
    live: LiveNamespace, input_checksum: InputChecksum | None, next_offsets: dict[str, int]
) -> None:
    """Record the checksum of each input's lines up to the batch's next offset (committed
    with it; a refused commit reloads the stored ones)."""
    if input_checksum is None:
        return
    for key, offset in next_offsets.items():
        crc = input_checksum(key, offset)
        if crc is not None:
            live.inputs[key] = {"offset": offset, "crc32": crc}


def build_request(
    store: StateStore,
    live: LiveNamespace,
    input_checksum: InputChecksum | None,
    first_offsets: dict[str, int],
    next_offsets: dict[str, int],
    delta: StatsDelta | None,
    events: list[dict[str, Any]],
    rep: BatchReport,
    if_announced: set[str],
    stories: StoriesChange | None = None,
) -> CommitRequest:
    """The batch's commit request; with the novelty state for a store that keeps it per
    batch (a shared one)."""
    counters = {
        "docs": rep.valid,
        "invalid": rep.invalid,
        "births": rep.births,
        "clusters": rep.model_births,
        "batches": 1,
    }
    note_inputs(live, input_checksum, next_offsets)
    request = CommitRequest(
        first_offsets, next_offsets, delta, events, counters,
        if_announced=frozenset(if_announced), stories=stories,
    )  # fmt: skip
    if store.wants_batch_state:
        request = replace(request, novelty=live.novelty_json())
    return request


class Committer:
    """Commits batches to one store and knows whether the in-memory model runs ahead of it."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        #: a batch started and its commit has not returned: the in-memory model may hold part
        #: of a batch the store does not
        self.uncommitted = False

    def begin(self) -> None:
        """From here the in-memory model may run ahead of the store."""
        self.uncommitted = True

    def commit(
        self,
        live: LiveNamespace,
        request: CommitRequest,
        rep: BatchReport,
        adopt_state: Callable[[], None],
    ) -> Committed:
        """Apply the batch; ``adopt_state`` rebuilds the in-memory namespace when the store
        loaded it afresh. Raises StateDiverged when a shared store refused the batch."""
        first_offsets, events = request.first_offsets, request.events
        committed = self.store.commit(live.state, request)
        outcome = committed.outcome
        self.uncommitted = False
        moved = committed.vocabulary_moved
        if moved:  # another writer compacted the vocabulary just after this commit: the store
            adopt_state()  # loaded the namespace afresh, this batch included
        else:  # the words and documents other writers committed meanwhile
            live.take_in_foreign(committed.foreign_docs)
        if outcome is not CommitOutcome.COMMITTED and self.store.wants_batch_state:
            raise StateDiverged(
                f"the state store answered {outcome.value!r} for offsets {first_offsets}: "
                + (
                    committed.lease_refusal
                    or (
                        "another process now owns this input"
                        if outcome is CommitOutcome.FENCED
                        else "another process compacted the shared vocabulary (its word ids "
                        "changed)"
                        if outcome is CommitOutcome.STALE
                        else "this batch was already committed by another process"
                    )
                )
                + "; the in-memory model no longer matches the shared state",
                outcome,
                committed.lease_refusal,
            )
        rep.replayed = outcome is CommitOutcome.REPLAY
        rep.births -= births_among(events, committed.suppressed)  # announced by another replica
        return Committed(outcome, moved, set(committed.suppressed))
