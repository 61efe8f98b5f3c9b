"""In-process state store with an atomic on-disk snapshot (the embedded default).

The snapshot is one ``.npz`` file (no pickle): the statistics arrays plus a JSON document holding
the fingerprint, vocabulary, novelty candidates, offsets, counters and undelivered events. It is
written to a temporary file, fsynced and renamed over the previous one, so a crash at any moment
leaves either the old or the new snapshot, each internally consistent (state and offsets agree).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from noveld.models.kernels import multinomial as kern
from noveld.models.novelty import state_problem
from noveld.models.stories import stories_problem
from noveld.models.story_table import StoryTable
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import (
    FIRST_RESERVED_SLOT,
    CommitOutcome,
    CommitRequest,
    CommitResult,
    FingerprintMismatch,
    NamespaceState,
)
from noveld.state.stats_check import StatsCheck

SNAPSHOT_FORMAT = 1
#: the format of a snapshot whose vocabulary was compacted (it holds ``vocab_gone``, which a
#: noveld reading only format 1 would ignore: a smaller V), so such a noveld refuses it
COMPACTED_SNAPSHOT_FORMAT = 2
SNAPSHOT_NAME = "state.npz"


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
    return diffs + more


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


def write_snapshot(
    path: Path,
    state: NamespaceState,
    outbox: list[dict[str, Any]],
    uidnext: dict[str, int] | None = None,
) -> None:
    """Atomically replace ``path`` with a snapshot of ``state``: write, fsync, rename, fsync.

    The same file is the ``noveld state export`` format; ``uidnext`` (next cluster counter per
    uid slot, see the Redis store) defaults to the single writer's next uid.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    if uidnext is None:
        uidnext = {"0": int(state.stats.ictl[3])}
    meta = {
        "format": COMPACTED_SNAPSHOT_FORMAT if state.vocab_gone.shape[0] else SNAPSHOT_FORMAT,
        "fingerprint": state.fingerprint,
        "vocab": state.vocab,
        "vocab_checked": state.vocab_checked,
        "novelty": state.novelty,
        "offsets": state.offsets,
        "counters": state.counters,
        "outbox": outbox,
        "uidnext": uidnext,
        "stories": state.stories.to_json(),
    }
    arrays = {f"stats.{k}": v for k, v in state.stats.to_arrays().items()}
    arrays["vocab_gone"] = state.vocab_gone.astype(np.uint64)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, allow_pickle=False, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
    except OSError as exc:  # a full disk: name the file (the last snapshot stands)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OSError(exc.errno, f"cannot write the state snapshot {tmp}: {exc.strerror}") from exc
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


class SnapshotError(ValueError):
    """A snapshot that cannot be used — unreadable, foreign, or damaged — with a one-line reason
    naming the file (and the damaged field). A ``ValueError``: the CLI prints it as one line and
    exits 2."""


def read_snapshot(path: Path) -> tuple[NamespaceState, list[dict[str, Any]]]:
    """Inverse of :func:`write_snapshot`; :class:`SnapshotError` on an unreadable, foreign or
    damaged file (see :func:`read_export`)."""
    state, outbox, _ = read_export(path)
    return state, outbox


def _damage(exc: Exception) -> str:
    """A short reason for an unreadable snapshot (numpy's own advice to load pickles unsafely
    is no advice for a state file)."""
    text = str(exc)
    if "pickle" in text:
        return "not an archive of plain arrays"
    return f"{type(exc).__name__}: {text[:120]}" if text else type(exc).__name__


def read_export(
    path: Path,
) -> tuple[NamespaceState, list[dict[str, Any]], dict[str, int]]:
    """A snapshot / export file: state, undelivered events and uid-slot counters.

    Everything returned is checked first (:class:`_SnapshotCheck`): the header's structure and
    types, and the statistics arrays' dtypes, lengths, values and postings lists, so that no
    damaged or foreign-but-well-formed file reaches the numba kernels (which index without
    bounds checks) or the pipeline; :class:`SnapshotError` names the file and the field.
    """
    try:
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode())
            stats = {k[len("stats.") :]: z[k] for k in z.files if k.startswith("stats.")}
            gone = z["vocab_gone"] if "vocab_gone" in z.files else np.zeros(0, np.uint64)
    except OSError as exc:
        raise SnapshotError(f"cannot read snapshot {path}: {exc}") from exc
    except Exception as exc:  # a foreign or damaged file fails in numpy, zipfile, zlib or json
        raise SnapshotError(
            f"cannot read snapshot {path}: not a noveld snapshot, or a damaged one ({_damage(exc)})"
        ) from exc
    return _SnapshotCheck(path).validated(meta, stats, gone)


# ---- validation of a snapshot read from disk ---------------------------------------------------

_INT64_MAX = np.iinfo(np.int64).max


def _is_int(v: object) -> bool:
    """A JSON integer (not a boolean) that fits an int64."""
    return type(v) is int and -_INT64_MAX - 1 <= v <= _INT64_MAX


def _is_count(v: object) -> bool:
    """A JSON integer ≥ 0 that fits an int64."""
    return _is_int(v) and v >= 0  # type: ignore[operator]


def _shown(v: object) -> str:
    """A value as the message shows it: short, with its JSON type when it is not a number."""
    kinds = {str: "a string", list: "a list", dict: "an object", bool: "a boolean"}
    if v is None:
        return "null"
    if type(v) in kinds:
        text = json.dumps(v)
        return kinds[type(v)] + (f" ({text})" if len(text) <= 40 else "")
    return repr(v)


class _SnapshotCheck(StatsCheck):
    """The checks of one snapshot file; each failure is a :class:`SnapshotError` naming the
    file and the field. O(size of the file): vectorised numpy over the arrays, one pass over the
    header's lists."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, field: str, what: str) -> NoReturn:
        raise SnapshotError(f"snapshot {self.path} is damaged: {field} {what}")

    def validated(
        self, meta: Any, stats: dict[str, np.ndarray], gone: np.ndarray
    ) -> tuple[NamespaceState, list[dict[str, Any]], dict[str, int]]:
        if not isinstance(meta, dict):
            self.fail("meta", f"(the JSON header) is not an object but {_shown(meta)}")
        fmt = meta.get("format")
        if type(fmt) is not int or fmt not in (SNAPSHOT_FORMAT, COMPACTED_SNAPSHOT_FORMAT):
            raise SnapshotError(
                f"snapshot {self.path} has format {fmt if type(fmt) is int else _shown(fmt)}, "
                f"this noveld reads {SNAPSHOT_FORMAT} and {COMPACTED_SNAPSHOT_FORMAT}"
            )
        if gone.ndim != 1 or gone.dtype != np.uint64 or bool(np.any(gone[1:] <= gone[:-1])):
            self.fail("vocab_gone", "is not sorted word hashes")
        for key in ("fingerprint", "vocab", "novelty", "offsets", "counters", "outbox"):
            if key not in meta:
                self.fail(key, "is missing from the header")
        fingerprint = meta["fingerprint"]
        if not isinstance(fingerprint, dict):
            self.fail(
                "fingerprint", f"is not an object of model settings but {_shown(fingerprint)}"
            )
        vocab = self.vocab(meta["vocab"])
        checked = meta.get("vocab_checked", 0)
        if not _is_count(checked) or checked > len(vocab):
            self.fail("vocab_checked", f"is not a word count 0..{len(vocab)}: {_shown(checked)}")
        offsets = self.int_map("offsets", meta["offsets"], "partition → next offset")
        counters = self.int_map("counters", meta["counters"], "name → count")
        if offsets and not counters:
            self.fail("counters", f"is empty although {len(offsets)} partition(s) were read")
        novelty = self.novelty(meta["novelty"], len(vocab))
        outbox = self.outbox(meta["outbox"])
        stories = meta.get("stories", {})  # a snapshot from before summaries were kept: none
        problem = stories_problem(stories)
        if problem is not None:
            self.fail(*problem)
        stored_uidnext = self.uidnext(meta.get("uidnext", {}))
        arrays = self.stats(stats, len(vocab), stored_uidnext)
        state = NamespaceState(
            fingerprint=fingerprint,
            stats=MultinomialStats.from_arrays(arrays),
            vocab=vocab,
            vocab_gone=np.asarray(gone, dtype=np.uint64),
            vocab_checked=checked,
            novelty=novelty,
            offsets=offsets,
            counters=counters,
            stories=StoryTable.from_json(stories),
        )
        uidnext = dict(stored_uidnext)
        uidnext.setdefault("0", int(state.stats.ictl[kern.NEXT_UID]))
        return state, outbox, uidnext

    # ---- the JSON header --------------------------------------------------------------------
    def vocab(self, vocab: Any) -> list[str]:
        if not isinstance(vocab, list):
            self.fail("vocab", f"is not a list of words but {_shown(vocab)}")
        try:
            "".join(vocab)  # the quickest test that every item is a string
        except TypeError:
            i = next(i for i, w in enumerate(vocab) if type(w) is not str)
            self.fail("vocab", f"holds a non-word at {i}: {_shown(vocab[i])}")
        if len(set(vocab)) != len(vocab):
            seen: set[str] = set()
            for w in vocab:
                if w in seen:
                    self.fail("vocab", f"holds the word {w!r} twice")
                seen.add(w)
        return vocab

    def int_map(self, field: str, value: Any, shape: str) -> dict[str, int]:
        if not isinstance(value, dict):
            self.fail(field, f"is not an object of {shape} but {_shown(value)}")
        for k, v in value.items():
            if not _is_count(v):
                self.fail(f"{field}[{k!r}]", f"is not a whole number ≥ 0: {_shown(v)}")
        return value

    def uidnext(self, value: Any) -> dict[str, int]:
        uidnext = self.int_map("uidnext", value, "uid slot → next cluster counter")
        for k in uidnext:
            if not (k.isascii() and k.isdigit() and int(k) < FIRST_RESERVED_SLOT):
                self.fail("uidnext", f"names {k!r}, not a uid slot 0..{FIRST_RESERVED_SLOT - 1}")
        return uidnext

    def novelty(self, novelty: Any, n_words: int) -> dict[str, Any]:
        problem = state_problem(novelty, n_words)
        if problem is not None:
            self.fail(*problem)
        assert isinstance(novelty, dict)
        return novelty

    def outbox(self, outbox: Any) -> list[dict[str, Any]]:
        if not isinstance(outbox, list):
            self.fail("outbox", f"is not a list of events but {_shown(outbox)}")
        for i, e in enumerate(outbox):
            if not (
                isinstance(e, dict)
                and isinstance(e.get("event_id"), str)
                and isinstance(e.get("type"), str)
            ):
                self.fail(f"outbox[{i}]", "is not an event (an object with event_id and type)")
        return outbox
