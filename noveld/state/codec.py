"""Binary encodings of what the Redis store keeps: batch deltas (the log) and checkpoints.

Versioned and self-describing, no pickle. A delta is one packed byte string so a commit ships
a batch's change in one Lua argument ("one packed payload, not one command per
count"); a checkpoint is an ``.npz`` archive of the statistics arrays plus a JSON header.
"""

from __future__ import annotations

import io
import json
import struct
from typing import Any

import numpy as np

from noveld.models.base import StatsDelta
from noveld.models.suffstats import MultinomialStats

DELTA_MAGIC = b"NVD"
DELTA_VERSION = 1
# magic, version, flags, clusters, entries, born, retired, merges, documents, decay
_HEADER = struct.Struct("<3sBIqqqqqqd")
_INTEGRAL = 1  # word counts are whole numbers and were packed as int32

_FLOAT_FIELDS = frozenset({"dm", "dntok", "word_count"})

CHECKPOINT_VERSION = 1


class CodecError(ValueError):
    """A stored blob is corrupt or written by an incompatible version."""


def encode_delta(delta: StatsDelta) -> bytes:
    """Pack a :class:`StatsDelta`: header, then little-endian arrays (ids int64, word ids and
    cluster indices int32, counts int32 when integral else float64)."""
    wc = delta.word_count
    integral = bool(wc.shape[0] == 0 or (np.all(wc == np.round(wc)) and np.abs(wc).max() < 2**31))
    header = _HEADER.pack(
        DELTA_MAGIC,
        DELTA_VERSION,
        _INTEGRAL if integral else 0,
        delta.cluster_uids.shape[0],
        wc.shape[0],
        delta.born_uids.shape[0],
        delta.retired_uids.shape[0],
        delta.merges.shape[0],
        delta.documents(),
        delta.decay,
    )
    parts = [
        header,
        delta.cluster_uids.astype("<i8").tobytes(),
        delta.dm.astype("<f8").tobytes(),
        delta.dntok.astype("<f8").tobytes(),
        delta.word_cluster.astype("<i4").tobytes(),
        delta.word_ids.astype("<i4").tobytes(),
        wc.astype("<i4" if integral else "<f8").tobytes(),
        delta.born_uids.astype("<i8").tobytes(),
        delta.retired_uids.astype("<i8").tobytes(),
        delta.merges.astype("<i8").tobytes(),
    ]
    return b"".join(parts)


def decode_delta(blob: bytes) -> StatsDelta:
    """Inverse of :func:`encode_delta`; :class:`CodecError` on a corrupt or foreign blob."""
    if len(blob) < _HEADER.size:
        raise CodecError(f"delta blob too short ({len(blob)} bytes)")
    magic, version, flags, nc, ne, nb, nr, nm, n_docs, decay = _HEADER.unpack_from(blob)
    if magic != DELTA_MAGIC or version != DELTA_VERSION:
        raise CodecError(f"not a version-{DELTA_VERSION} noveld delta (magic {magic!r} v{version})")
    count_type = "<i4" if flags & _INTEGRAL else "<f8"
    layout = [
        ("cluster_uids", "<i8", nc),
        ("dm", "<f8", nc),
        ("dntok", "<f8", nc),
        ("word_cluster", "<i4", ne),
        ("word_ids", "<i4", ne),
        ("word_count", count_type, ne),
        ("born_uids", "<i8", nb),
        ("retired_uids", "<i8", nr),
        ("merges", "<i8", 2 * nm),
    ]
    need = _HEADER.size + sum(np.dtype(t).itemsize * n for _, t, n in layout)
    if len(blob) != need:
        raise CodecError(f"delta blob is {len(blob)} bytes, its header says {need}")
    out: dict[str, np.ndarray] = {}
    pos = _HEADER.size
    for name, dtype, n in layout:
        a = np.frombuffer(blob, dtype=dtype, count=n, offset=pos)
        pos += a.nbytes
        out[name] = a.astype(np.float64 if name in _FLOAT_FIELDS else np.int64)
    out["merges"] = out["merges"].reshape(-1, 2)
    return StatsDelta(decay=float(decay), n_docs=int(n_docs), **out)


def encode_checkpoint(stats: MultinomialStats, header: dict[str, Any]) -> bytes:
    """The statistics arrays and a JSON header (log position, vocabulary size…) as ``.npz``."""
    buf = io.BytesIO()
    meta = {"version": CHECKPOINT_VERSION, **header}
    arrays: dict[str, Any] = dict(stats.to_arrays())
    arrays["header"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(buf, **arrays)
    return buf.getvalue()


def decode_checkpoint(blob: bytes) -> tuple[MultinomialStats, dict[str, Any]]:
    """Inverse of :func:`encode_checkpoint` (refuses pickled content). Unchecked: a blob from
    outside goes through :func:`decode_checkpoint_arrays` and a ``StatsCheck`` instead."""
    arrays, header = decode_checkpoint_arrays(blob)
    return MultinomialStats.from_arrays(arrays), header


def decode_checkpoint_arrays(blob: bytes) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A checkpoint's statistics arrays (as :meth:`MultinomialStats.to_arrays` wrote them)
    and its header; :class:`CodecError` on an unreadable or foreign blob."""
    try:
        with np.load(io.BytesIO(blob), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except Exception as exc:  # zipfile/ValueError: anything unreadable is corrupt
        raise CodecError(f"unreadable checkpoint: {exc}") from exc
    try:
        header: dict[str, Any] = json.loads(arrays.pop("header").tobytes())
    except (KeyError, ValueError) as exc:
        raise CodecError("checkpoint has no valid header") from exc
    if header.get("version") != CHECKPOINT_VERSION:
        raise CodecError(f"checkpoint version {header.get('version')} is not supported")
    return arrays, header
