"""The on-disk snapshot of a namespace: one ``.npz`` file (no pickle) holding the statistics
arrays and a JSON header (fingerprint, vocabulary, novelty candidates, offsets, counters, story
summaries, undelivered events), written atomically (temporary file, fsync, rename) and read back
with every field checked, so a damaged file is refused with the field named."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from noveld.models.kernels import multinomial as kern
from noveld.models.novelty_state import state_problem
from noveld.models.stories import stories_problem
from noveld.models.story_table import StoryTable
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import FIRST_RESERVED_SLOT, NamespaceState
from noveld.state.stats_check import StatsCheck

SNAPSHOT_FORMAT = 1
#: the format of a snapshot whose vocabulary was compacted (it holds ``vocab_gone``, which a
#: noveld reading only format 1 would ignore: a smaller V), so such a noveld refuses it
COMPACTED_SNAPSHOT_FORMAT = 2
SNAPSHOT_NAME = "state.npz"


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
