"""Redis state store (DESIGN §6): statistics, offsets, fencing epochs and the event outbox of a
namespace, all under the hash tag ``{ns}`` so one Lua script commits a batch atomically.

Layout (prefix ``noveld:{ns}:``): ``meta`` (fingerprint, scale, next_uid, docs_seen), ``counters``,
``offsets``, ``epochs``, ``outbox`` (stream), ``cm`` / ``cn`` (cluster uid → raw document / token
mass), ``cw:<uid>`` (word id → raw count), ``vocab`` (list, id = index), ``novelty`` (JSON).
"""

from __future__ import annotations

import contextlib
import json
from importlib.resources import files
from typing import Any

import numpy as np
import redis

from noveld.models.suffstats import MultinomialStats
from noveld.state.base import (
    CommitOutcome,
    CommitRequest,
    FingerprintMismatch,
    NamespaceState,
)
from noveld.state.memory import describe_mismatch

_COMMIT_LUA = files("noveld.state").joinpath("commit.lua").read_text()
_STATUS = {
    "committed": CommitOutcome.COMMITTED,
    "replay": CommitOutcome.REPLAY,
    "fenced": CommitOutcome.FENCED,
}


class StoreConflict(RuntimeError):
    """The stored state moved under this writer (offset gap, vocabulary race): reload."""


class RedisStore:
    """A namespace's durable state in Redis; every batch is one atomic Lua commit."""

    def __init__(self, client: redis.Redis, namespace: str) -> None:
        # redis-py's stubs type replies as unions of bytes/str/None; replies here are bytes
        self.client: Any = client
        self.namespace = namespace
        self.prefix = f"noveld:{{{namespace}}}:"
        names = ["meta", "counters", "offsets", "epochs", "outbox", "cm", "cn", "vocab", "novelty"]
        self.keys = {n: self.prefix + n for n in names}
        self._commit = client.register_script(_COMMIT_LUA)
        self.epochs: dict[str, int] = {}
        self._stream_ids: dict[str, bytes] = {}

    @property
    def wants_batch_state(self) -> bool:
        """Each commit carries new words and the novelty state."""
        return True

    # ---- fencing --------------------------------------------------------------------------
    def claim(self, partition_keys: list[str]) -> dict[str, int]:
        """Take ownership of partitions: bump their epochs; older owners are fenced from now."""
        pipe = self.client.pipeline(transaction=True)
        for key in partition_keys:
            pipe.hincrby(self.keys["epochs"], key, 1)
        for key, epoch in zip(partition_keys, pipe.execute(), strict=True):
            self.epochs[key] = int(epoch)
        return dict(self.epochs)

    def claim_keys(self, partition_keys: list[str]) -> None:
        """:meth:`claim` without the result (a rebalance callback)."""
        self.claim(partition_keys)

    def stored_offset(self, partition_key: str) -> int:
        """Next offset of a partition as committed with the state (0 if never seen)."""
        return int(self.client.hget(self.keys["offsets"], partition_key) or 0)

    def release(self, partition_keys: list[str]) -> None:
        """Forget partitions this writer no longer owns (it can no longer commit them)."""
        for key in partition_keys:
            self.epochs.pop(key, None)

    # ---- load -----------------------------------------------------------------------------
    def load(self, fingerprint: dict[str, Any]) -> NamespaceState | None:
        """The namespace's state (None if new); refuses an incompatible fingerprint."""
        meta = {k.decode(): v.decode() for k, v in self.client.hgetall(self.keys["meta"]).items()}
        wanted = json.dumps(fingerprint, sort_keys=True)
        if not meta:
            self.client.hsetnx(self.keys["meta"], "fingerprint", wanted)
            meta = {
                k.decode(): v.decode() for k, v in self.client.hgetall(self.keys["meta"]).items()
            }
        stored = json.loads(meta["fingerprint"])
        if stored != fingerprint:
            raise FingerprintMismatch(
                f"namespace {self.namespace!r} in Redis was written with different model "
                f"settings ({describe_mismatch(stored, fingerprint)}); use another --namespace "
                "or the original settings"
            )
        if "scale" not in meta:
            return None
        return self._read_state(fingerprint, meta)

    def read(self) -> NamespaceState | None:
        """The stored state with its own fingerprint, for inspection (None if absent)."""
        meta = {k.decode(): v.decode() for k, v in self.client.hgetall(self.keys["meta"]).items()}
        if "scale" not in meta:
            return None
        return self._read_state(json.loads(meta["fingerprint"]), meta)

    def outbox_length(self) -> int:
        """Events not yet acknowledged."""
        return int(self.client.xlen(self.keys["outbox"]))

    def _read_state(self, fingerprint: dict[str, Any], meta: dict[str, str]) -> NamespaceState:
        c = self.client
        cm = {int(k): float(v) for k, v in c.hgetall(self.keys["cm"]).items()}
        cn = {int(k): float(v) for k, v in c.hgetall(self.keys["cn"]).items()}
        uids = sorted(cm)
        pipe = c.pipeline(transaction=False)
        for uid in uids:
            pipe.hgetall(f"{self.prefix}cw:{uid}")
        words = []
        for h in pipe.execute():
            ws = np.array([int(k) for k in h], dtype=np.int64)
            cs = np.array([float(v) for v in h.values()], dtype=np.float64)
            order = np.argsort(ws)
            words.append((ws[order], cs[order]))
        vocab = [w.decode() for w in c.lrange(self.keys["vocab"], 0, -1)]
        stats = MultinomialStats.from_clusters(
            uids,
            [cm[u] for u in uids],
            [cn.get(u, 0.0) for u in uids],
            words,
            float(meta["scale"]),
            int(meta.get("next_uid", 0)),
            int(meta.get("docs_seen", 0)),
            len(vocab),
        )
        novelty_raw = c.get(self.keys["novelty"])
        return NamespaceState(
            fingerprint=fingerprint,
            stats=stats,
            vocab=vocab,
            novelty=json.loads(novelty_raw) if novelty_raw else {},
            offsets={k.decode(): int(v) for k, v in c.hgetall(self.keys["offsets"]).items()},
            counters={k.decode(): int(v) for k, v in c.hgetall(self.keys["counters"]).items()},
        )

    # ---- commit ---------------------------------------------------------------------------
    def commit(self, state: NamespaceState, request: CommitRequest) -> CommitOutcome:
        """One atomic Lua call: fence, offsets check, vocabulary, delta, counters, outbox."""
        d = request.delta
        stats = state.stats
        payload: dict[str, Any] = {
            "epochs": {k: self.epochs.get(k, 0) for k in request.first_offsets},
            "first": request.first_offsets,
            "next": request.next_offsets,
            "vocab_base": request.vocab_base,
            "new_words": request.new_words,
            "decay": 1.0 if d is None else d.decay,
            "clusters": [] if d is None else d.cluster_uids.tolist(),
            "dm": [] if d is None else d.dm.tolist(),
            "dn": [] if d is None else d.dntok.tolist(),
            "wc": []
            if d is None
            else np.column_stack([d.word_cluster, d.word_ids, d.word_count])
            .astype(np.int64 if np.all(d.word_count == np.round(d.word_count)) else np.float64)
            .ravel()
            .tolist(),
            "retired": [] if d is None else d.retired_uids.tolist(),
            "integral": d is None or bool(np.all(d.word_count == np.round(d.word_count))),
            "counters": request.counters,
            "next_uid": int(stats.ictl[3]),
            "docs_seen": int(stats.ictl[4]),
            "novelty": json.dumps(request.novelty or {}),
            "events": [
                [e["event_id"], json.dumps(e, separators=(",", ":"))] for e in request.events
            ],
        }
        status, detail = self._commit(
            keys=list(self.keys.values()),
            args=[json.dumps(payload, separators=(",", ":")), self.prefix + "cw:"],
        )
        outcome = status.decode() if isinstance(status, bytes) else str(status)
        if outcome == "conflict":
            raise StoreConflict(detail.decode() if isinstance(detail, bytes) else str(detail))
        if outcome == "committed":
            state.offsets.update(request.next_offsets)
            for k, v in request.counters.items():
                state.counters[k] = state.counters.get(k, 0) + v
        return _STATUS[outcome]

    def flush(self, state: NamespaceState) -> None:
        """Commits are durable per the server's AOF policy; wait for the local fsync."""
        # a server without AOF or WAITAOF (Redis < 7.2) has nothing more to wait for
        with contextlib.suppress(redis.ResponseError):
            self.client.execute_command("WAITAOF", 1, 0, 1000)

    def flush_due(self) -> bool:
        """Every commit is already in Redis."""
        return False

    # ---- outbox ---------------------------------------------------------------------------
    def outbox_pending(self) -> list[dict[str, Any]]:
        """Events in the outbox stream, oldest first."""
        out = []
        for sid, fields in self.client.xrange(self.keys["outbox"], "-", "+"):
            ev = json.loads(fields[b"event"])
            self._stream_ids[ev["event_id"]] = sid
            out.append(ev)
        return out

    def ack(self, event_ids: list[str]) -> None:
        """Remove delivered events from the outbox."""
        sids = [self._stream_ids.pop(e) for e in event_ids if e in self._stream_ids]
        if sids:
            self.client.xdel(self.keys["outbox"], *sids)
