"""In-process state store with an atomic on-disk snapshot (the embedded default).

The snapshot is one ``.npz`` file (no pickle): the statistics arrays plus a JSON document holding
the fingerprint, vocabulary, novelty candidates, offsets, counters and undelivered events. It is
written to a temporary file, fsynced and renamed over the previous one, so a crash at any moment
leaves either the old or the new snapshot, each internally consistent (state and offsets agree).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from noveld.models.suffstats import MultinomialStats
from noveld.state.base import (
    CommitOutcome,
    CommitRequest,
    CommitResult,
    FingerprintMismatch,
    NamespaceState,
)
from noveld.state.snapshot import (
    COMPACTED_SNAPSHOT_FORMAT,
    SNAPSHOT_FORMAT,
    SNAPSHOT_NAME,
    SnapshotError,
    read_export,
    read_snapshot,
    write_snapshot,
)

#: the snapshot's reading and writing live in :mod:`noveld.state.snapshot`; re-exported here
__all__ = [
    "COMPACTED_SNAPSHOT_FORMAT",
    "SNAPSHOT_FORMAT",
    "SNAPSHOT_NAME",
    "MemoryStore",
    "OffsetGap",
    "SnapshotError",
    "check_offsets",
    "describe_mismatch",
    "read_export",
    "read_snapshot",
    "write_snapshot",
]


class OffsetGap(RuntimeError):
    """A batch starts after the stored offset: records would be skipped."""


#: fingerprint fields that bring others with them: when one differs, the rest is its echo
_LEADING_FIELDS = ("kind", "likelihood")


def describe_mismatch(stored: dict[str, Any], wanted: dict[str, Any]) -> str:
    """Human-readable list of fingerprint fields that differ. When the model or likelihood
    differs, that alone is named (with a count of the settings that come with it): the list of
    every setting one model has and the other lacks buried it."""
    keys = sorted(set(stored) | set(wanted))
    differ = [k for k in keys if stored.get(k) != wanted.get(k)]
    leading = [k for k in _LEADING_FIELDS if k in differ]
    shown = leading or differ
    diffs = "; ".join(f"{k}: stored={stored.get(k)!r} configured={wanted.get(k)!r}" for k in shown)
    rest = len(differ) - len(shown)
    more = f" (and {rest} setting{'s' if rest > 1 else ''} that come with it)" if rest else ""
    words = stored.get("likelihood") == "multinomial" and wanted.get("likelihood") == "hybrid"
    hint = "; a namespace of the words model resumes with --featurizer words" if words else ""
    return diffs + more + hint


def check_offsets(state: NamespaceState, first_offsets: dict[str, int]) -> CommitOutcome | None:
    """REPLAY if the stored offsets are past the batch's first offsets; None if they match."""
    for key, first in first_offsets.items():
        stored = state.offsets.get(key, 0)
        if stored > first:
            return CommitOutcome.REPLAY
        if stored < first:
            raise OffsetGap(f"{key}: stored next offset {stored} but batch starts at {first}")
    return None


class MemoryStore:
    """State kept in the process; durable through periodic atomic snapshots in ``state_dir``."""

    def __init__(
        self,
        state_dir: Path | None,
        snapshot_interval_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state_dir = state_dir
        self.snapshot_interval_s = snapshot_interval_s
        self._clock = clock
        self._last_snapshot = clock()
        self._outbox: list[dict[str, Any]] = []
        self.snapshots_written = 0
        self.shared_announcements = False  # one writer: no other announces its clusters

    def check_writable(self) -> None:
        """Raise ``OSError`` now, not at the first snapshot, if the state directory cannot take
        one (created if missing; probed by writing a file, as permission bits can mislead)."""
        if self.state_dir is None:
            return
        self.state_dir.mkdir(parents=True, exist_ok=True)
        probe = self.state_dir / f".noveld-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()

    @property
    def snapshot_path(self) -> Path | None:
        """Where the snapshot lives (None: purely in memory)."""
        return None if self.state_dir is None else self.state_dir / SNAPSHOT_NAME

    def load(self, fingerprint: dict[str, Any]) -> NamespaceState | None:
        """Read the snapshot if there is one; refuse an incompatible fingerprint."""
        path = self.snapshot_path
        if path is None or not path.exists():
            return None
        state, outbox = read_snapshot(path)
        if state.fingerprint != fingerprint:
            raise FingerprintMismatch(
                f"state in {path} was written with different model settings "
                f"({describe_mismatch(state.fingerprint, fingerprint)}); use another "
                "--state-dir or the original settings"
            )
        self._outbox = outbox
        return state

    def intern(self, state: NamespaceState, known: int, new_words: list[str]) -> list[str]:
        """A private vocabulary: the new words get the next ids as they are."""
        del state.vocab[known:]
        state.vocab.extend(new_words)
        return new_words

    def before_batch(self, state: NamespaceState, first_offsets: dict[str, int]) -> None:
        """Nothing to prepare: one writer, one uid sequence."""

    def refresh(self, state: NamespaceState) -> dict[int, int]:
        """Nothing to take in: no other writer."""
        return {}

    def compact_vocabulary(
        self,
        state: NamespaceState,
        stats: MultinomialStats,
        vocab: list[str],
        gone: np.ndarray,
        novelty: dict[str, Any],
    ) -> bool:
        """One writer: always; the next snapshot holds the renumbered state."""
        state.stats, state.vocab, state.vocab_gone, state.novelty = stats, vocab, gone, novelty
        state.vocab_checked = len(vocab)
        return True

    def commit(self, state: NamespaceState, request: CommitRequest) -> CommitResult:
        """Record offsets, counters and events (the owner snapshots when :meth:`flush_due`)."""
        replay = check_offsets(state, request.first_offsets)
        if replay is not None:
            return CommitResult(replay)
        state.offsets.update(request.next_offsets)
        for k, v in request.counters.items():
            state.counters[k] = state.counters.get(k, 0) + v
        if request.stories is not None:
            state.stories.apply(request.stories)
        # one writer announces every cluster itself: an end offered for a cluster it did
        # not announce was never announced
        # (and nobody else renumbers its words, and it holds no lease)
        left_out = tuple(
            e["event_id"] for e in request.events if e["event_id"] in request.if_announced
        )
        self._outbox.extend(e for e in request.events if e["event_id"] not in request.if_announced)
        return CommitResult(CommitOutcome.COMMITTED, left_out)

    @property
    def wants_batch_state(self) -> bool:
        """Snapshots read vocabulary and novelty from the state object at flush time."""
        return False

    def flush_due(self) -> bool:
        """True when a snapshot directory is set and the snapshot interval has passed."""
        return self.state_dir is not None and (
            self._clock() - self._last_snapshot >= self.snapshot_interval_s
        )

    def ping(self) -> None:
        """Nothing to reach: the state is in the process."""

    def flush(self, state: NamespaceState) -> None:
        """Write the snapshot now (no-op without a state dir)."""
        path = self.snapshot_path
        if path is None:
            return
        write_snapshot(path, state, self._outbox)
        self._last_snapshot = self._clock()
        self.snapshots_written += 1

    def replicated(self) -> bool:
        """An in-process store has no replicas to wait for."""
        return True

    def outbox_pending(self) -> list[dict[str, Any]]:
        """Events committed but not yet acknowledged."""
        return list(self._outbox)

    def ack(self, event_ids: list[str]) -> None:
        """Forget delivered events."""
        done = set(event_ids)
        self._outbox = [e for e in self._outbox if e["event_id"] not in done]
