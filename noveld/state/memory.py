"""In-process state store with an atomic on-disk snapshot (the embedded default, DESIGN §1).

The snapshot is one ``.npz`` file (no pickle): the statistics arrays plus a JSON document holding
the fingerprint, vocabulary, novelty candidates, offsets, counters and undelivered events. It is
written to a temporary file, fsynced and renamed over the previous one, so a crash at any moment
leaves either the old or the new snapshot, each internally consistent (state and offsets agree).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from noveld.models.kernels import multinomial as kern
from noveld.models.novelty import state_problem
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import (
    FIRST_RESERVED_SLOT,
    CommitOutcome,
    CommitRequest,
    FingerprintMismatch,
    NamespaceState,
)

SNAPSHOT_FORMAT = 1
#: the format of a snapshot whose vocabulary was compacted (it holds ``vocab_gone``, which a
#: noveld reading only format 1 would ignore: a smaller V), so such a noveld refuses it
COMPACTED_SNAPSHOT_FORMAT = 2
SNAPSHOT_NAME = "state.npz"


class OffsetGap(RuntimeError):
    """A batch starts after the stored offset: records would be skipped."""


def describe_mismatch(stored: dict[str, Any], wanted: dict[str, Any]) -> str:
    """Human-readable list of fingerprint fields that differ."""
    keys = sorted(set(stored) | set(wanted))
    diffs = [
        f"{k}: stored={stored.get(k)!r} configured={wanted.get(k)!r}"
        for k in keys
        if stored.get(k) != wanted.get(k)
    ]
    return "; ".join(diffs)


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
        self.suppressed: list[str] = []  # one writer: no other announces its clusters
        self.shared_announcements = False
        self.vocabulary_moved = False  # one writer: nobody else renumbers its words

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

    def commit(self, state: NamespaceState, request: CommitRequest) -> CommitOutcome:
        """Record offsets, counters and events (the owner snapshots when :meth:`flush_due`)."""
        replay = check_offsets(state, request.first_offsets)
        if replay is not None:
            return replay
        state.offsets.update(request.next_offsets)
        for k, v in request.counters.items():
            state.counters[k] = state.counters.get(k, 0) + v
        # one writer announces every cluster itself: an end offered for a cluster it did
        # not announce was never announced
        self.suppressed = [
            e["event_id"] for e in request.events if e["event_id"] in request.if_announced
        ]
        self._outbox.extend(e for e in request.events if e["event_id"] not in request.if_announced)
        return CommitOutcome.COMMITTED

    @property
    def wants_batch_state(self) -> bool:
        """Snapshots read vocabulary and novelty from the state object at flush time."""
        return False

    def flush_due(self) -> bool:
        """True when a snapshot directory is set and the snapshot interval has passed."""
        return self.state_dir is not None and (
            self._clock() - self._last_snapshot >= self.snapshot_interval_s
        )

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
    }
    arrays = {f"stats.{k}": v for k, v in state.stats.to_arrays().items()}
    arrays["vocab_gone"] = state.vocab_gone.astype(np.uint64)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        np.savez(fh, allow_pickle=False, **arrays)
        fh.flush()
        os.fsync(fh.fileno())
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

#: uid = slot << 40 | counter (``redis_store.UID_SLOT_BITS``; not imported: that pulls in redis)
_UID_SLOT_BITS = 40
_INT64_MAX = np.iinfo(np.int64).max
#: the statistics arrays by the dtype kinds they may have ('b' bool, 'i'/'u' integers, 'f' float)
_STATS_KINDS = {
    "m": "iuf",
    "ntok": "iuf",
    "alive": "b",
    "uid": "iu",
    "free_stack": "iu",
    "head": "iu",
    "nxt": "iu",
    "pk": "iu",
    "pc": "iuf",
    "ictl": "iu",
    "scale": "iuf",
}
#: the ``ictl`` fields (kernels.multinomial) by position; snapshots from before DOCS_SEEN have 4
_ICTL_NAMES = {
    kern.POOL_USED: "pool_used",
    kern.KMAX: "kmax",
    kern.NFREE: "nfree",
    kern.NEXT_UID: "next_uid",
    kern.DOCS_SEEN: "docs_seen",
    kern.STEPS: "steps",
}
_ICTL_MIN = kern.NEXT_UID + 1
#: what a rounding error may leave below zero in a mass or count (relative to the largest)
_ROUNDING = 1e-9


def _is_int(v: object) -> bool:
    """A JSON integer (not a boolean) that fits an int64."""
    return type(v) is int and -_INT64_MAX - 1 <= v <= _INT64_MAX


def _is_count(v: object) -> bool:
    """A JSON integer ≥ 0 that fits an int64."""
    return _is_int(v) and v >= 0  # type: ignore[operator]


def _outside(x: np.ndarray, lo: int, hi: int) -> int:
    """The first index of ``x`` whose value is not in ``[lo, hi)``, or -1 (two reductions when
    every value is: the usual case)."""
    if not x.shape[0] or (int(x.min()) >= lo and int(x.max()) < hi):
        return -1
    return int(np.argmax((x < lo) | (x >= hi)))


def _shown(v: object) -> str:
    """A value as the message shows it: short, with its JSON type when it is not a number."""
    kinds = {str: "a string", list: "a list", dict: "an object", bool: "a boolean"}
    if v is None:
        return "null"
    if type(v) in kinds:
        text = json.dumps(v)
        return kinds[type(v)] + (f" ({text})" if len(text) <= 40 else "")
    return repr(v)


class _SnapshotCheck:
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

    # ---- the statistics arrays --------------------------------------------------------------
    def stats(
        self, raw: dict[str, np.ndarray], n_words: int, uidnext: dict[str, int]
    ) -> dict[str, np.ndarray]:
        """The statistics arrays, checked and converted to the dtypes ``from_arrays`` makes of
        them: what the kernels rely on (lengths, pointers and slots in range, acyclic postings
        lists) and what the model's arithmetic does (finite, non-negative masses and counts)."""
        a = {name: self.array(name, raw.get(name), kinds) for name, kinds in _STATS_KINDS.items()}
        ictl = a["ictl"]
        if ictl.shape[0] < _ICTL_MIN:
            self.fail("stats.ictl", f"has {ictl.shape[0]} fields, fewer than {_ICTL_MIN}")
        for i, name in _ICTL_NAMES.items():
            if i < ictl.shape[0] and ictl[i] < 0:
                self.fail(f"stats.ictl ({name})", f"is negative: {int(ictl[i])}")
        used, kmax, nfree = (int(ictl[i]) for i in (kern.POOL_USED, kern.KMAX, kern.NFREE))
        for name in ("m", "ntok", "alive", "uid"):
            if a[name].shape[0] != kmax:
                self.fail(
                    f"stats.{name}",
                    f"has {a[name].shape[0]} entries but stats.ictl (kmax) says {kmax} slots",
                )
        if a["free_stack"].shape[0] != nfree:
            self.fail(
                "stats.free_stack",
                f"has {a['free_stack'].shape[0]} entries but stats.ictl (nfree) says {nfree}",
            )
        pool = a["pk"].shape[0]
        for name in ("nxt", "pc"):
            if a[name].shape[0] != pool:
                self.fail(f"stats.{name}", f"has {a[name].shape[0]} entries, stats.pk {pool}")
        if used > pool:
            self.fail("stats.ictl (pool_used)", f"is {used} but the pool holds {pool} entries")
        if a["scale"].shape[0] != 1 or not (np.isfinite(a["scale"][0]) and a["scale"][0] > 0):
            self.fail("stats.scale", f"is not one finite positive number: {a['scale'][:3]}")
        self.masses("stats.m", a["m"], "slot")
        self.masses("stats.ntok", a["ntok"], "slot")
        self.masses("stats.pc", a["pc"][:used], "entry")
        alive, uid = a["alive"], a["uid"]
        self.free_stack(a["free_stack"], alive)
        self.postings(a["head"], a["nxt"][:used], a["pk"][:used], kmax, used)
        words = np.flatnonzero(a["head"] >= 0)
        if words.shape[0] and int(words[-1]) >= n_words:
            self.fail(
                "stats.head", f"counts word {int(words[-1])}, beyond the vocab's {n_words} words"
            )
        self.uids(uid[alive], np.flatnonzero(alive), uidnext)
        return a

    def array(self, name: str, x: np.ndarray | None, kinds: str) -> np.ndarray:
        field = f"stats.{name}"
        if x is None:
            self.fail(field, "is missing")
        if x.dtype.kind not in kinds:
            self.fail(field, f"has dtype {x.dtype}, not {'bool' if kinds == 'b' else 'numeric'}")
        if x.ndim != 1:
            self.fail(field, f"is not one-dimensional (shape {x.shape})")
        if kinds == "b":
            return x
        if kinds == "iu":
            if x.dtype.kind == "u" and x.shape[0] and int(x.max()) > _INT64_MAX:
                self.fail(field, f"holds {int(x.max())}, beyond int64")
            return x.astype(np.int64, copy=False)
        return x.astype(np.float64, copy=False)

    def masses(self, field: str, x: np.ndarray, what: str) -> None:
        """Finite and ≥ 0 (up to rounding: removals leave sums within an ulp of zero)."""
        if not x.shape[0]:
            return
        lo, hi = float(x.min()), float(x.max())  # NaN and infinities show in one of the two
        if not (np.isfinite(lo) and np.isfinite(hi)):
            i = int(np.argmax(~np.isfinite(x)))
            self.fail(field, f"holds {x[i]} ({what} {i}), not a finite number")
        if lo < -_ROUNDING * max(1.0, hi):
            i = int(np.argmin(x))
            self.fail(field, f"holds the negative value {x[i]} ({what} {i})")

    def free_stack(self, free: np.ndarray, alive: np.ndarray) -> None:
        kmax = alive.shape[0]
        i = _outside(free, 0, kmax)
        if i >= 0:
            self.fail("stats.free_stack", f"names slot {free[i]}, outside the {kmax} slots")
        if np.unique(free).shape[0] != free.shape[0]:
            self.fail("stats.free_stack", "names a slot twice")
        live = alive[free]
        if live.any():
            self.fail("stats.free_stack", f"names slot {free[int(np.argmax(live))]}, a live one")

    def postings(
        self, head: np.ndarray, nxt: np.ndarray, pk: np.ndarray, kmax: int, used: int
    ) -> None:
        """Every list starts and continues inside the pool and names slots < kmax; every entry
        of the pool is linked from exactly one place (a head or another entry): none from two
        (overlapping lists, which compaction would copy past the end of its buffers, or a
        loop into a list: an endless walk), none left out (counts lost); and no cycle."""
        w = _outside(head, -1, used)
        if w >= 0:
            self.fail(
                "stats.head",
                f"points outside the pool (word {w} → {head[w]}; the pool holds {used} entries)",
            )
        e = _outside(pk, 0, kmax)
        if e >= 0:
            self.fail("stats.pk", f"names slot {pk[e]} (entry {e}), outside the {kmax} slots")
        if self.compacted_layout(head, nxt, used):
            return
        e = _outside(nxt, -1, used)
        if e >= 0:
            self.fail(
                "stats.nxt",
                f"points outside the pool (entry {e} → {nxt[e]}; the pool holds {used} entries)",
            )
        # `used` links reaching every entry reach each once (a bincount only to name one)
        targets = (head[head >= 0], nxt[nxt >= 0])
        reached = np.zeros(used, dtype=np.bool_)
        for t in targets:
            reached[t] = True
        if targets[0].shape[0] + targets[1].shape[0] != used or not reached.all():
            links = np.bincount(np.concatenate(targets), minlength=used)
            if int(links.max()) > 1:
                e = int(np.argmax(links > 1))
                self.fail("stats.nxt", f"links entry {e} from two places (postings lists overlap)")
            e = int(np.argmax(links < 1))  # a snapshot's pool is compacted: no entry is unused
            self.fail("stats.head", f"leaves entry {e} out of every postings list")
        if bool(np.all((nxt < 0) | (nxt > np.arange(used)))):  # lists run forward: acyclic
            return
        jump = nxt.copy()
        todo = np.flatnonzero(jump >= 0)
        for _ in range(max(used, 1).bit_length() + 1):
            if not todo.shape[0]:
                return
            jump[todo] = jump[jump[todo]]
            todo = todo[jump[todo] >= 0]
        if todo.shape[0]:
            self.fail("stats.nxt", f"has a cycle (through entry {int(todo[0])})")

    @staticmethod
    def compacted_layout(head: np.ndarray, nxt: np.ndarray, used: int) -> bool:
        """Whether the pool is laid out as compaction (so every snapshot) leaves it, which
        passes the checks of :meth:`postings` at a glance (``head`` already checked to point
        inside the pool): each word's entries consecutive (``nxt[e]`` is ``e + 1`` or ``-1``,
        the last entry ``-1``), the lists in the order of their words, one after the other
        from entry 0 with no gap."""
        if not used or nxt[used - 1] != -1:
            return False
        ends = nxt == -1
        if not bool(np.all((nxt == np.arange(1, used + 1)) | ends)):
            return False
        firsts = head[head >= 0]
        later = np.flatnonzero(ends[:-1]) + 1  # where the second, third... list starts
        return (
            firsts.shape[0] == later.shape[0] + 1
            and int(firsts[0]) == 0
            and bool(np.array_equal(firsts[1:], later))
        )

    def uids(self, uids: np.ndarray, slots: np.ndarray, uidnext: dict[str, int]) -> None:
        """Live clusters have distinct uids ≥ 0, below their slot's next counter (where the
        header names one): a counter at or below one of them would hand its uid out again."""
        if uids.shape[0] and int(uids.min()) < 0:
            i = int(np.argmin(uids))
            self.fail("stats.uid", f"gives the live slot {slots[i]} the negative uid {uids[i]}")
        distinct, counts = np.unique(uids, return_counts=True)
        if distinct.shape[0] != uids.shape[0]:
            self.fail("stats.uid", f"gives uid {distinct[int(np.argmax(counts))]} to two clusters")
        slot_of, counter = uids >> _UID_SLOT_BITS, uids & ((1 << _UID_SLOT_BITS) - 1)
        for key, nxt in uidnext.items():
            mine = counter[slot_of == int(key)]
            if mine.shape[0] and int(mine.max()) >= nxt:
                self.fail(
                    f"uidnext[{key!r}]",
                    f"is {nxt} but a live cluster of that slot has counter {int(mine.max())}",
                )
