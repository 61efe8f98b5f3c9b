"""Redis state store (DESIGN §6): a namespace's statistics as a checkpoint plus a log of packed
batch deltas, with offsets, fencing epochs, the shared vocabulary and the event outbox, all under
the hash tag ``{ns}`` so one Lua script commits a batch atomically.

Layout (prefix ``noveld:{ns}:``):

- ``meta`` — fingerprint, schema, ``seq`` (last log entry), ``ckpt_seq``
- ``log`` — stream of packed :class:`StatsDelta` (entry id ``<seq>-1``, fields ``w`` writer, ``d``)
- ``ckpt`` — the statistics as of ``ckpt_seq`` (see :mod:`noveld.state.codec`)
- ``vocab`` / ``vocab_idx`` — word list (id = index) and word → id
- ``offsets``, ``epochs`` — next offset and fencing epoch per ``topic:partition``
- ``uidnext`` — next cluster counter per uid slot; ``counters``; ``novelty`` (JSON);
  ``lifecycle`` — announced cluster id → its last event (``born``/``retired``/``merged``), so a
  cluster confirmed by two replicas is announced, and ended, once; ``outbox``
  — stream of committed, undelivered events: one entry per commit, fields ``"0"``, ``"1"``, …
  each an event's JSON (:func:`noveld.schema.event_json`), at most :data:`OUTBOX_ENTRY_EVENTS`
  per entry (entries of one field pair ``id``/``event`` per event, written by earlier
  versions, are read too)

A commit costs O(partitions + events) in Redis whatever the batch size: the delta travels as one
string. Loading reads the checkpoint and replays the log after it. Writers take cluster uids from
a slot (the lowest input partition of the batch, whose epoch they hold), so replicas sharing a
namespace never hand out the same uid; each replica applies the others' deltas after its own
commits (statistics are additive, DESIGN §6 scale-out).
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
import uuid
from importlib.resources import files
from typing import Any, NoReturn

import numpy as np
import redis
from redis.cluster import RedisCluster

from noveld.models.base import StatsDelta
from noveld.models.dpmm import replay_delta
from noveld.models.kernels import multinomial as kern
from noveld.models.novelty import json_kind, state_problem
from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import uncounted_ids
from noveld.schema import StoredEvent, event_json, stored_json
from noveld.state.base import (
    FIRST_RESERVED_SLOT,
    CommitOutcome,
    CommitRequest,
    FingerprintMismatch,
    NamespaceState,
    StaleVocabulary,
    births_among,
)
from noveld.state.codec import (
    CodecError,
    decode_checkpoint_arrays,
    decode_delta,
    encode_checkpoint,
    encode_delta,
)
from noveld.state.memory import describe_mismatch
from noveld.state.redis_url import SentinelURL, is_sentinel_url, parse_sentinel_url
from noveld.state.stats_check import StatsCheck, delta_problem

SCHEMA = 2
#: the schema of a namespace whose vocabulary was compacted: the same keys plus ``vocab_gone``
#: and ``meta.vocab_gen``, which a noveld reading only schema 2 would ignore (a smaller V, no
#: generation check), so it refuses the namespace instead
COMPACTED_SCHEMA = 3
#: an imported compacted namespace starts at a random vocabulary generation in
#: [2^32, 2^33): far above what compactions reach, below 2^53 (Lua's numbers are doubles)
IMPORTED_GENERATIONS = 1 << 32
#: events per outbox entry at most (a commit of more writes several; bounds a Lua call's stack)
OUTBOX_ENTRY_EVENTS = 1000
UID_SLOT_BITS = 40  # uid = slot << 40 | counter; partition 0's uids are plain counters
CHECKPOINT_EVERY = 200  # log entries between checkpoints
#: seconds a compaction's staged vocabulary outlives a writer that died before its script ran
STAGING_TTL_S = 3600
REPLICA_HOLD_S = 1.0  # after a short WAIT, hold events this long before asking again
PROBE_TTL_S = 60  # the write probe's key expires: it is not state

_LUA = files("noveld.state")
_STATUS = {
    "committed": CommitOutcome.COMMITTED,
    "replay": CommitOutcome.REPLAY,
    "fenced": CommitOutcome.FENCED,
    "stale": CommitOutcome.STALE,
}


class StoreConflict(RuntimeError):
    """The stored state moved under this writer (offset gap, shared uid slot): reload.
    ``another_writer``: the conflict is one a live second writer causes (the state may well be
    intact), not a loss of keys."""

    def __init__(self, message: str, another_writer: bool = False) -> None:
        super().__init__(message)
        self.another_writer = another_writer

    @classmethod
    def from_commit(cls, detail: str) -> StoreConflict:
        """The conflict the commit script (commit.lua) reported with ``detail``."""
        return cls(detail, any(mark in detail for mark in _ANOTHER_WRITERS_MARKS))


#: how the commit script (commit.lua, step 1b) words a refusal by the single writer's lease
_LEASE_MARK = "the writer lease "

#: the commit script's conflicts (commit.lua) that a second live writer causes
_ANOTHER_WRITERS_MARKS = (" gap: stored ", "(two writers share a slot?)")


ORPHANED_EVENTS_AFTER_S = 10.0
"""Age at which another writer's outbox entry is taken over: that writer died, or its broker
connection fails. Its own writer sends an entry right after the commit (milliseconds)."""


def _entry_events(fields: dict[bytes, bytes]) -> list[bytes]:
    """The events' JSON in one outbox entry, in order (also the one-event entries of earlier
    versions, fields ``id`` and ``event``)."""
    if b"event" in fields:
        return [fields[b"event"]]
    return [fields[k] for k in sorted((k for k in fields if k != b"w"), key=int)]


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _stream_entries(raw: list[Any]) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """XRANGE entries as (id, fields dict). A cluster client's transaction returns XRANGE
    unparsed (fields as a flat [k, v, …] list; redis-py 8.1), a plain client parsed."""
    out: list[tuple[bytes, dict[bytes, bytes]]] = []
    for entry_id, fields in raw:
        if isinstance(fields, list):
            fields = dict(zip(fields[::2], fields[1::2], strict=True))
        out.append((entry_id, fields))
    return out


#: the Redis type of each key of a namespace that exists (``ack`` and ``probe`` are overwritten
#: by SET whatever they hold; the staging keys are their writer's): one of another type is damage
_KEY_TYPES = {
    "meta": "hash",
    "counters": "hash",
    "offsets": "hash",
    "epochs": "hash",
    "outbox": "stream",
    "log": "stream",
    "uidnext": "hash",
    "novelty": "string",
    "lifecycle": "hash",
    "vocab": "list",
    "vocab_idx": "hash",
    "vocab_gone": "string",
    "ckpt": "string",
}
#: meta's fields that hold a non-negative integer
_META_COUNTS = ("schema", "seq", "ckpt_seq", "vocab_gen", "vocab_checked")


def _shown(raw: Any, limit: int = 40) -> str:
    """A stored value as a message quotes it: its text (bytes that are not UTF-8 escaped),
    cut to ``limit`` characters."""
    text = raw.decode(errors="backslashreplace") if isinstance(raw, bytes) else str(raw)
    return repr(text if len(text) <= limit else text[:limit] + "…")


_SET_OFFSET = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then return false end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return old
"""
_TAKE_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""
_DROP_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""
_LIFECYCLE = {"cluster.born": "born", "cluster.retired": "retired", "cluster.merged": "merged"}


def lifecycle_marks(
    events: list[dict[str, Any]], if_announced: frozenset[str] = frozenset()
) -> list[list[Any]]:
    """``[index, cluster id, step, event id, only if announced (0/1)]`` of each cluster event
    of a commit, for the commit script's once-per-cluster check (``lifecycle``)."""
    return [
        [
            i,
            e["cluster_id"],
            _LIFECYCLE[e["type"]],
            e["event_id"],
            int(e["event_id"] in if_announced),
        ]
        for i, e in enumerate(events)
        if e.get("type") in _LIFECYCLE and "cluster_id" in e
    ]


def uid_slot(partition_keys: list[str]) -> int:
    """The uid slot of a batch: the lowest partition number among its inputs."""
    parts = [int(k.rsplit(":", 1)[1]) for k in partition_keys if k.rsplit(":", 1)[-1].isdigit()]
    return min(parts, default=0)


def connect(
    url: str, timeout_s: float = 5.0, socket_timeout_s: float | None = None
) -> redis.Redis | RedisCluster:
    """A client for ``url``: a cluster client when the server runs in cluster mode (``INFO
    cluster``), so a cluster's configuration endpoint works as given; the Sentinel-managed
    primary for a ``redis+sentinel://`` URL; else a plain one. All of a namespace's keys share
    one hash slot, so its scripts and transactions stay on one node. Raises
    ``redis.RedisError`` when the server does not answer, ``ValueError`` for a bad URL.

    ``socket_timeout_s`` bounds the wait for any reply: without it a hung server, or a network
    that silently drops packets, blocks the caller until TCP gives up (hours)."""
    if is_sentinel_url(url):
        return sentinel_primary(parse_sentinel_url(url), timeout_s, socket_timeout_s)
    client = redis.Redis.from_url(
        url, socket_connect_timeout=timeout_s, socket_timeout=socket_timeout_s
    )
    try:
        clustered = bool(int(client.info("cluster").get("cluster_enabled", 0)))
    except redis.ResponseError:  # INFO renamed or disabled: take the server as it presents
        clustered = False
    if not clustered:
        return client
    client.close()
    return RedisCluster.from_url(  # reads the slot map
        url, socket_connect_timeout=timeout_s, socket_timeout=socket_timeout_s
    )


def sentinel_primary(
    target: SentinelURL, timeout_s: float = 5.0, socket_timeout_s: float | None = None
) -> redis.Redis:
    """A client of the primary the sentinels name for ``target.service``. Its connections ask
    the sentinels again whenever they (re)connect, so after a failover the daemon's outage
    ride-out lands on the promoted replica; a demoted primary's READONLY reply also drops the
    connection. Raises ``MasterNotFoundError`` (a ``ConnectionError``) when no sentinel
    answers or none knows the service."""
    from redis.sentinel import MasterNotFoundError, Sentinel

    # a sentinel that does not answer within the timeout is skipped, not waited for
    sentinel_kwargs: dict[str, Any] = {
        "socket_connect_timeout": timeout_s,
        "socket_timeout": timeout_s,
    }
    if target.sentinel_password is not None:
        sentinel_kwargs["password"] = target.sentinel_password
        sentinel_kwargs["username"] = target.sentinel_username
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(target.sentinels), sentinel_kwargs=sentinel_kwargs, socket_connect_timeout=timeout_s
    )
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        target.service,
        db=target.db,
        username=target.username,
        password=target.password,
        socket_timeout=socket_timeout_s,
    )
    try:
        client.ping()
    except MasterNotFoundError as exc:  # its message dumps every sentinel's connection repr
        why = "; ".join(
            _sentinel_trouble(s, a)
            for s, a in zip(sentinel.sentinels, target.sentinels, strict=True)
        )
        raise MasterNotFoundError(
            f"no sentinel answered with a primary for service {target.service!r} ({why})"
        ) from exc
    return client


def _sentinel_trouble(sentinel: redis.Redis, address: tuple[str, int]) -> str:
    """What one sentinel says when asked for the service: its error, or that it answers."""
    where = f"{address[0]}:{address[1]}"
    try:
        sentinel.ping()
    except redis.RedisError as exc:
        return f"{where}: {exc}"
    return f"{where}: answers, but does not name a primary for it"


def _gone_hashes(raw: bytes | None, namespace: str) -> np.ndarray:
    """The ``vocab_gone`` key: sorted little-endian uint64 word hashes (none if absent)."""
    if raw is None:
        return np.zeros(0, np.uint64)
    if len(raw) % 8:
        raise StoreConflict(f"namespace {namespace!r}: its vocab_gone key is damaged")
    gone = np.frombuffer(raw, dtype="<u8").astype(np.uint64)
    if bool(np.any(gone[1:] <= gone[:-1])):
        raise StoreConflict(f"namespace {namespace!r}: its vocab_gone key is not sorted")
    return gone


class _Trimmed(Exception):
    """The log no longer holds entries a replica has to apply."""


class _CheckpointCheck(StatsCheck):
    """The statistics checks of a Redis checkpoint: failures name the namespace's ckpt key."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store

    def fail(self, field: str, what: str) -> NoReturn:
        raise self.store._damaged("ckpt", f"is damaged: {field} {what}")


class RedisStore:
    """A namespace's durable state in Redis (a server or a cluster); every batch is one atomic
    Lua commit."""

    def __init__(
        self,
        client: redis.Redis | RedisCluster,
        namespace: str,
        checkpoint_every: int = CHECKPOINT_EVERY,
        replicas_to_ack: int = 0,
        replica_ack_timeout_ms: int = 200,
    ) -> None:
        # redis-py's stubs type replies as unions of bytes/str/None; replies here are bytes
        self.client: Any = client
        self.clustered = isinstance(client, RedisCluster)
        self.namespace = namespace
        self.prefix = f"noveld:{{{namespace}}}:"
        names = [
            "meta",
            "counters",
            "offsets",
            "epochs",
            "outbox",
            "log",
            "uidnext",
            "novelty",
            "lifecycle",
            "vocab",
            "vocab_idx",
            "vocab_gone",
            "ckpt",
            "ack",
            "probe",
            "lease",
        ]
        self.keys = {n: self.prefix + n for n in names}
        self._commit = client.register_script(_LUA.joinpath("commit.lua").read_text())
        self._intern = client.register_script(_LUA.joinpath("intern.lua").read_text())
        self._checkpoint = client.register_script(_LUA.joinpath("checkpoint.lua").read_text())
        self._compact = client.register_script(_LUA.joinpath("compact.lua").read_text())
        self.checkpoint_every = checkpoint_every
        self.writer = uuid.uuid4().hex[:12]
        self._started = False  # outbox_pending has taken over what earlier writers left
        # this writer's own staging keys for a compaction (writers compacting at once must not
        # append to one list), dropped by the script or, after a crash, by their expiry
        self.staging = (
            f"{self.prefix}vocab_next:{self.writer}",
            f"{self.prefix}vocab_idx_next:{self.writer}",
        )
        self.epochs: dict[str, int] = {}
        self.last_seq = 0  # log entries reflected in the caller's in-memory statistics
        self.vocab_gen = 0  # compactions of the vocabulary as of the caller's word ids
        # another writer compacted the vocabulary after this writer's last commit, which then
        # loaded the namespace afresh: the caller's vocabulary and novelty state are stale
        self.vocabulary_moved = False
        self.half_life_docs = 0.0
        self._slot: int | None = None
        self._uid_next = 0  # counter of the current slot
        self._stream_ids: dict[str, bytes] = {}  # event id → its outbox entry
        self._entry_events: dict[bytes, set[str]] = {}  # outbox entry → events not yet acked
        self.reloads = 0  # times this replica fell behind a checkpoint and reloaded
        self.replicas_to_ack = replicas_to_ack
        self.replica_ack_timeout_ms = replica_ack_timeout_ms
        self._hold_until = 0.0  # after a short WAIT, answer "not replicated" until then
        self.suppressed: list[str] = []  # the last commit's events another writer announced
        self.shared_announcements = True  # replicas of one namespace announce its clusters
        # > 0: one writer at a time (svi, whose global step does not commute, DESIGN §6); every
        # commit then checks that no other writer holds the lease, and renews it for this long
        self.lease_ms = 0
        self.lease_refusal = ""  # the commit script's reason when the writer lease refused

    @property
    def wants_batch_state(self) -> bool:
        """Each commit carries the novelty state."""
        return True

    # ---- fencing --------------------------------------------------------------------------
    def claim(self, partition_keys: list[str]) -> dict[str, int]:
        """Take ownership of partitions: bump their epochs; older owners are fenced from now."""
        pipe = self.client.pipeline(transaction=True)
        for key in partition_keys:
            pipe.hincrby(self.keys["epochs"], key, 1)
        for key, epoch in zip(partition_keys, pipe.execute(), strict=True):
            self.epochs[key] = int(epoch)
        self._slot = None  # ownership changed: re-read the uid slot counter
        return dict(self.epochs)

    def restore_claims(self) -> list[str]:
        """After Redis came back: claim again the partitions whose epoch the store lost, and
        return them. A store behind this writer's grant (a lower epoch) went through a failover
        that lost the claim; without a new one every commit would be refused as fenced. A
        higher epoch means another writer owns the partition now, which stays so."""
        owned = list(self.epochs)
        if not owned:
            return []
        stored = self.client.hmget(self.keys["epochs"], owned)
        lost = [
            k
            for k, v in zip(owned, stored, strict=True)
            if (0 if v is None else self._count("epochs", k, v)) < self.epochs[k]
        ]
        if lost:
            self.claim(lost)
        return lost

    def claim_keys(self, partition_keys: list[str]) -> None:
        """:meth:`claim` without the result (a rebalance callback)."""
        self.claim(partition_keys)

    def stored_offset(self, partition_key: str) -> int:
        """Next offset of a partition as committed with the state (0 if never seen)."""
        raw = self.client.hget(self.keys["offsets"], partition_key)
        return 0 if raw is None else self._count("offsets", partition_key, raw)

    def has_state(self) -> bool:
        """Whether the namespace exists (its meta key holds a fingerprint)."""
        return bool(self.client.hexists(self.keys["meta"], "fingerprint"))

    def partitions(self) -> list[str]:
        """The partitions the namespace stores an offset for, sorted."""
        return sorted(_text(p) for p in self.client.hkeys(self.keys["offsets"]))

    def set_offset(self, partition_key: str, offset: int) -> int | None:
        """Replace a partition's stored next offset (an operator's decision for a held
        partition); returns the one it replaces, or None — nothing written — when the namespace
        has no offset for that partition. One atomic script: a commit cannot slip between the
        check and the write."""
        old = self.client.eval(_SET_OFFSET, 1, self.keys["offsets"], partition_key, offset)
        return None if old is None else int(old)

    # ---- the single writer's lease (svi) --------------------------------------------------
    def take_lease(self) -> str | None:
        """Take (or renew) the namespace's writer lease for ``lease_ms``: None when this writer
        holds it now, else the id of the writer that does."""
        holder = self.client.eval(_TAKE_LEASE, 1, self.keys["lease"], self.writer, self.lease_ms)
        return None if holder is None else _text(holder)

    def behind(self) -> bool:
        """Whether the namespace's log holds entries this writer has not taken in (another
        writer committed since this one loaded or last committed)."""
        raw = self.client.hget(self.keys["meta"], "seq")
        return (0 if raw is None else self._count("meta", "seq", raw)) > self.last_seq

    def drop_lease(self) -> None:
        """Give the lease up (a graceful stop), so a standby takes over at once; another
        writer's lease is left alone."""
        self.client.eval(_DROP_LEASE, 1, self.keys["lease"], self.writer)

    def release(self, partition_keys: list[str]) -> None:
        """Forget partitions this writer no longer owns (it can no longer commit them)."""
        for key in partition_keys:
            self.epochs.pop(key, None)
        self._slot = None

    # ---- load -----------------------------------------------------------------------------
    def load(self, fingerprint: dict[str, Any]) -> NamespaceState | None:
        """The namespace's state (None if new); refuses an incompatible fingerprint."""
        meta = self._meta()
        wanted = json.dumps(fingerprint, sort_keys=True)
        if "fingerprint" not in meta:
            pipe = self.client.pipeline(transaction=True)
            pipe.hsetnx(self.keys["meta"], "fingerprint", wanted)
            pipe.hsetnx(self.keys["meta"], "schema", SCHEMA)
            pipe.execute()
            meta = self._meta()
        stored = self._fingerprint(meta)
        if stored != fingerprint:
            raise FingerprintMismatch(
                f"namespace {self.namespace!r} in Redis was written with different model "
                f"settings ({describe_mismatch(stored, fingerprint)}); use another --namespace "
                "or the original settings"
            )
        self._check_schema(meta)
        # the uid counter is re-read with the state: after a failover the store may be behind
        # this writer's last commits, and its counter with it
        self._slot = None
        return self._read_state(fingerprint)

    def read(self) -> NamespaceState | None:
        """The stored state with its own fingerprint, for inspection (None if absent)."""
        meta = self._meta()
        if "fingerprint" not in meta:
            return None
        self._check_schema(meta)
        return self._read_state(self._fingerprint(meta))

    def export(self) -> tuple[NamespaceState, list[dict[str, Any]], dict[str, int]] | None:
        """The state, its undelivered events and uid counters as of one instant — read in the
        same transaction, so a copy taken while writers commit is consistent (a backup needs
        no stop); None if the namespace holds no state."""
        meta = self._meta()
        if "fingerprint" not in meta:
            return None
        self._check_schema(meta)
        state, outbox, uidnext = self._read(self._fingerprint(meta), with_outbox=True)
        return None if state is None else (state, outbox, uidnext)

    def outbox_length(self) -> int:
        """Events not yet acknowledged (each parsed: an unreadable one is damage, named)."""
        entries = self.client.xrange(self.keys["outbox"], "-", "+")
        return sum(len(self._stored_events(sid, fields)) for sid, fields in entries)

    def log_length(self) -> int:
        """Delta log entries kept (since the checkpoint before last)."""
        return int(self.client.xlen(self.keys["log"]))

    def _meta(self) -> dict[str, str]:
        """The meta hash, once every key of the namespace has its type and meta's counts are
        counts (:class:`StoreConflict` naming the key and what is wrong otherwise; the
        fingerprint is checked as it is read, :meth:`_fingerprint`)."""
        pipe = self._typed_transaction()
        pipe.hgetall(self.keys["meta"])
        (raw,) = self._execute_typed(pipe)
        meta = {self._str("meta", k, "a field name"): v for k, v in raw.items()}
        for name in _META_COUNTS:
            if name in meta:
                self._count("meta", name, meta[name])
        return {k: self._str("meta", v, f"field {k!r}") for k, v in meta.items()}

    # ---- damage ---------------------------------------------------------------------------
    def _damaged(self, key: str, what: str) -> StoreConflict:
        """A key of the namespace holds what noveld never writes there (exit 6, the key
        named: the operator restores the namespace or starts a new one)."""
        return StoreConflict(f"namespace {self.namespace!r}: key {key} {what}")

    def _typed_transaction(self) -> Any:
        """A transaction that begins by asking each key's type (:meth:`_execute_typed`)."""
        pipe = self.client.pipeline(transaction=True)
        for name in _KEY_TYPES:
            pipe.type(self.keys[name])
        return pipe

    def _execute_typed(self, pipe: Any) -> list[Any]:
        """Run a :meth:`_typed_transaction`: the replies after the types, once every existing
        key is of its type — a key of another type is damage, not an outage (its WRONGTYPE
        reply would otherwise read as "Redis unreachable")."""
        replies = pipe.execute(raise_on_error=False)
        for (name, want), got in zip(_KEY_TYPES.items(), replies, strict=False):
            if isinstance(got, Exception):
                raise got
            if _text(got) not in ("none", want):
                raise self._damaged(name, f"is a Redis {_text(got)}, not a {want}")
        rest: list[Any] = replies[len(_KEY_TYPES) :]
        for reply in rest:
            if isinstance(reply, Exception):
                raise reply
        return rest

    def _str(self, key: str, raw: Any, what: str) -> str:
        """A stored name or value as text (``what`` of ``key``: not UTF-8 is damage)."""
        try:
            return _text(raw)
        except UnicodeDecodeError:
            raise self._damaged(key, f"has {what} that is not UTF-8 ({_shown(raw)})") from None

    def _count(self, key: str, field: str, raw: Any) -> int:
        """A stored non-negative integer (an offset, a counter, a sequence number)."""
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if value < 0:
            raise self._damaged(
                key, f"field {field!r} is not a non-negative integer ({_shown(raw)})"
            )
        return value

    def _counts(self, key: str, raw: dict[Any, Any]) -> dict[str, int]:
        """A hash of non-negative integers (offsets, counters, epochs, uid counters)."""
        out: dict[str, int] = {}
        for name, value in raw.items():
            field = self._str(key, name, "a field name")
            out[field] = self._count(key, field, value)
        return out

    def _fingerprint(self, meta: dict[str, str]) -> dict[str, Any]:
        """meta's model settings: a JSON object whose ``half_life_docs`` is a number."""
        try:
            stored = json.loads(meta["fingerprint"])
        except ValueError as exc:
            raise self._damaged("meta", f"field 'fingerprint' is not JSON ({exc})") from None
        if not isinstance(stored, dict):
            raise self._damaged(
                "meta", f"field 'fingerprint' is a JSON {json_kind(stored)}, not an object"
            )
        if json_kind(stored.get("half_life_docs", 0.0)) != "number":
            raise self._damaged(
                "meta", "field 'fingerprint' has a 'half_life_docs' that is not a number"
            )
        return stored

    def _novelty(self, raw: bytes | None) -> dict[str, Any]:
        """The novelty key's JSON (an empty object if absent)."""
        if not raw:
            return {}
        try:
            novelty = json.loads(raw)
        except ValueError as exc:
            raise self._damaged("novelty", f"is not JSON ({exc})") from None
        problem = state_problem(novelty)
        if problem is not None:
            where, what = problem
            entry = where.removeprefix("novelty").removeprefix(".")
            raise self._damaged("novelty", f"entry {entry} {what}" if entry else what)
        assert isinstance(novelty, dict)
        return novelty

    def _vocabulary(self, raw: list[bytes]) -> list[str]:
        """The vocab list as words (the list can be long: one pass unless a word is bad)."""
        try:
            return [_text(w) for w in raw]
        except UnicodeDecodeError:
            for i, w in enumerate(raw):
                self._str("vocab", w, f"a word at index {i}")
            raise

    def _uid_counters(self, raw: dict[Any, Any]) -> dict[str, int]:
        """The uidnext hash: uid slot number → next counter."""
        counters = self._counts("uidnext", raw)
        for slot in counters:
            if not (slot.isascii() and slot.isdigit()):
                raise self._damaged("uidnext", f"has a field {slot!r} that is not a uid slot")
        return counters

    def _decoded_checkpoint(
        self, blob: bytes, n_words: int, uidnext: dict[str, int]
    ) -> tuple[MultinomialStats, int]:
        """The checkpoint's statistics, checked (:class:`StatsCheck`: word ids against the
        vocabulary's ``n_words``, uids against the slots' counters), and its log position."""
        if not blob.startswith(b"PK"):  # an .npz is a zip archive
            raise self._damaged("ckpt", "is not a noveld checkpoint (not an .npz archive)")
        try:
            arrays, header = decode_checkpoint_arrays(blob)
        except CodecError as exc:  # numpy's reasons run on (its advice about allow_pickle)
            why = str(exc).split(". ", 1)[0]
            raise self._damaged("ckpt", f"is not a noveld checkpoint ({why})") from exc
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise self._damaged(
                "ckpt", f"is not a noveld checkpoint (its arrays: {exc!r})"
            ) from exc
        at = header.get("seq") if isinstance(header, dict) else None
        if not isinstance(at, int) or isinstance(at, bool) or at < 0:
            raise self._damaged("ckpt", f"has no log position in its header ({_shown(at)})")
        checked = _CheckpointCheck(self).stats(arrays, n_words, uidnext)
        return MultinomialStats.from_arrays(checked), at

    def _delta(
        self, entry_id: Any, fields: dict[bytes, bytes], n_words: int | None = None
    ) -> StatsDelta:
        """A log entry's statistics delta, checked (:func:`delta_problem`; word ids against
        ``n_words`` when given)."""
        blob = fields.get(b"d")
        if blob is None:
            raise self._damaged("log", f"entry {_text(entry_id)} has no field 'd'")
        try:
            delta = decode_delta(blob)
        except ValueError as exc:  # CodecError
            raise self._damaged(
                "log", f"entry {_text(entry_id)} is not a noveld delta ({exc})"
            ) from exc
        self._check_delta(entry_id, delta, n_words)
        return delta

    def _check_delta(self, entry_id: Any, delta: StatsDelta, n_words: int | None) -> None:
        problem = delta_problem(delta, n_words)
        if problem is None:
            return
        field, what = problem
        top = int(delta.word_ids.max()) if delta.word_ids.shape[0] else -1
        if field == "word_ids" and n_words is not None and top >= n_words:
            raise StoreConflict(  # the vocabulary is the likelier loss (as in _check_whole)
                f"namespace {self.namespace!r} counts word ids up to {top} (log entry "
                f"{_text(entry_id)}) but its vocabulary holds {n_words} words (its vocab key is "
                "gone or cut)"
            )
        raise self._damaged("log", f"entry {_text(entry_id)}'s {field} {what}")

    def _event_texts(self, entry_id: Any, fields: dict[bytes, bytes]) -> list[bytes]:
        """An outbox entry's events (:func:`_entry_events`)."""
        try:
            return _entry_events(fields)
        except ValueError:  # a field name that is not an event's index
            raise self._damaged(
                "outbox", f"entry {_text(entry_id)} has fields that are not event indices"
            ) from None

    def _stored_events(self, entry_id: Any, fields: dict[bytes, bytes]) -> list[StoredEvent]:
        """An outbox entry's events, parsed."""
        events = []
        for raw in self._event_texts(entry_id, fields):
            try:
                ev = StoredEvent.parse(raw)
            except (ValueError, TypeError):  # not JSON, not ASCII, not an object
                ev = None
            if ev is None or not isinstance(ev.get("event_id"), str):
                raise self._damaged(
                    "outbox",
                    f"entry {_text(entry_id)} holds an event that is not one ({_shown(raw)})",
                )
            events.append(ev)
        return events

    def _check_schema(self, meta: dict[str, str]) -> None:
        schema = self._count("meta", "schema", meta.get("schema", SCHEMA))
        if schema not in (SCHEMA, COMPACTED_SCHEMA):
            raise FingerprintMismatch(
                f"namespace {self.namespace!r} uses storage schema {meta.get('schema')}, this "
                f"noveld reads schemas {SCHEMA} and {COMPACTED_SCHEMA}; export it with the "
                "version that wrote it and import it"
            )

    def _read_state(self, fingerprint: dict[str, Any]) -> NamespaceState | None:
        """Checkpoint + log replay (:meth:`_read`)."""
        return self._read(fingerprint)[0]

    def _read(
        self, fingerprint: dict[str, Any], with_outbox: bool = False
    ) -> tuple[NamespaceState | None, list[dict[str, Any]], dict[str, int]]:
        """Checkpoint + log replay, read in one transaction so a concurrent checkpoint cannot
        trim entries between the two reads; with the uid counters and (``with_outbox``) the
        outbox's events of the same instant. What the keys hold is checked right after the
        fetch, before any of it is used: a key of the wrong type, a count that is not one, JSON
        of the wrong shape, an undecodable checkpoint or log entry is a :class:`StoreConflict`
        naming the key (exit 6), not a traceback."""
        k = self.keys
        pipe = self._typed_transaction()
        pipe.get(k["ckpt"])
        pipe.xrange(k["log"], "-", "+")
        pipe.lrange(k["vocab"], 0, -1)
        pipe.get(k["novelty"])
        pipe.hgetall(k["offsets"])
        pipe.hgetall(k["counters"])
        pipe.hget(k["meta"], "seq")
        pipe.hgetall(k["uidnext"])
        pipe.hmget(k["meta"], ["vocab_gen", "vocab_checked"])
        pipe.get(k["vocab_gone"])
        pipe.hgetall(k["epochs"])  # only checked: claims and commits count on it
        if with_outbox:
            pipe.xrange(k["outbox"], "-", "+")
        (ckpt, log_raw, vocab_raw, novelty_raw, offsets_raw, counters_raw, seq_raw, uidnext_raw,
         (gen_raw, checked_raw), gone, epochs_raw, *rest) = self._execute_typed(pipe)  # fmt: skip
        seq, gen, checked = (
            0 if raw is None else self._count("meta", name, raw)
            for name, raw in (
                ("seq", seq_raw),
                ("vocab_gen", gen_raw),
                ("vocab_checked", checked_raw),
            )
        )
        offsets = self._counts("offsets", offsets_raw)
        counters = self._counts("counters", counters_raw)
        self._counts("epochs", epochs_raw)
        counters_of = self._uid_counters(uidnext_raw)
        vocab = self._vocabulary(vocab_raw)
        novelty = self._novelty(novelty_raw)
        outbox: list[dict[str, Any]] = [
            ev
            for sid, fields in (_stream_entries(rest[0]) if rest else [])
            for ev in self._stored_events(sid, fields)
        ]
        log = _stream_entries(log_raw)
        if ckpt is None and not log and not offsets:
            self.last_seq = 0
            return None, outbox, counters_of
        self.half_life_docs = float(fingerprint.get("half_life_docs", 0.0))
        if ckpt is not None:
            stats, at = self._decoded_checkpoint(ckpt, len(vocab), counters_of)
        else:
            stats, at = MultinomialStats(), 0
        for entry_id, fields in log:
            s = int(_text(entry_id).split("-")[0])
            if s <= at:
                continue
            if s != at + 1:
                raise StoreConflict(
                    f"delta log of namespace {self.namespace!r} jumps from {at} to {s}: "
                    "entries are missing (was the log trimmed by hand?)"
                )
            replay_delta(
                stats,
                self._delta(entry_id, fields, len(vocab)),
                self.half_life_docs,
                uncounted=lambda: uncounted_ids(vocab),
            )
            at = s
        if at != seq:
            raise StoreConflict(f"log ends at {at} but meta says {seq}")
        self._check_whole(stats, at, len(vocab), offsets, counters_of)
        if gen > 0 and gone is None:
            raise StoreConflict(
                f"namespace {self.namespace!r} had its vocabulary compacted but keeps no record "
                "of the words that went (its vocab_gone key is gone): the model would count "
                "fewer words than it has seen"
            )
        self.last_seq = at
        self.vocab_gen = gen
        self.vocabulary_moved = False
        state = NamespaceState(
            fingerprint=fingerprint,
            stats=stats,
            vocab=vocab,
            vocab_gone=_gone_hashes(gone, self.namespace),
            vocab_checked=checked,
            novelty=novelty,
            offsets=offsets,
            counters=counters,
        )
        return state, outbox, counters_of

    def _lost(self) -> StoreConflict:
        """The namespace's meta (its fingerprint) is gone: flushed, evicted, deleted."""
        return StoreConflict(f"namespace {self.namespace!r} has no meta key any more")

    def emptied(self) -> StoreConflict:
        """The namespace held state before an outage and holds none after it."""
        return StoreConflict(
            f"namespace {self.namespace!r} came back from the outage without any state (a "
            "Redis restarted without persistence, a failover to an empty replica, a flush); "
            "going on would start the model from nothing and re-read only what the input "
            "topic still retains, under event ids already used"
        )

    def unwitnessed(self, group: str, read: dict[str, int]) -> StoreConflict:
        """The namespace has no offsets for a topic the consumer group has read (``read``)."""
        where = ", ".join(f"{key} up to {off}" for key, off in sorted(read.items()))
        return StoreConflict(
            f"namespace {self.namespace!r} has no offsets for its input, but consumer group "
            f"{group!r} has read {where}: the namespace's state was lost (a flush, a Redis "
            "restarted without persistence), or the group served another namespace. Starting "
            "would re-read only what the topic retains, under event ids already used. If this "
            "namespace is meant to start from nothing, pass --accept-empty-state (or use a new "
            "--group)"
        )

    def _check_whole(
        self,
        stats: MultinomialStats,
        at: int,
        vocab_len: int,
        offsets: dict[str, int],
        uidnext: dict[str, int],
    ) -> None:
        """Refuse a state whose parts do not fit together (keys deleted or evicted): committed
        batches without offsets (the input would be read again: counted twice), word ids
        beyond the vocabulary (words mixed up), cluster uids at or beyond their slot's counter
        (uids handed out again)."""
        ns = self.namespace
        if at > 0 and not offsets:
            raise StoreConflict(
                f"namespace {ns!r} has {at} commits but no offsets (its offsets key is gone)"
            )
        words = np.flatnonzero(stats.head >= 0)
        if words.shape[0] and int(words[-1]) >= vocab_len:
            raise StoreConflict(
                f"namespace {ns!r} counts word ids up to {int(words[-1])} but its vocabulary "
                f"holds {vocab_len} words (its vocab key is gone or cut)"
            )
        counters = {int(s): v for s, v in uidnext.items()}
        uids = stats.uid[stats.active_slots()]
        slots, counts = uids >> UID_SLOT_BITS, uids & ((1 << UID_SLOT_BITS) - 1)
        for slot in np.unique(slots[slots < FIRST_RESERVED_SLOT]).tolist():
            top = int(counts[slots == slot].max())
            if top >= counters.get(int(slot), 0):
                raise StoreConflict(
                    f"namespace {ns!r} has cluster uid counter {top} in slot {slot} but the "
                    f"slot's next counter is {counters.get(int(slot), 0)} (its uidnext key is "
                    "gone)"
                )

    def import_state(
        self, state: NamespaceState, outbox: list[dict[str, Any]], uidnext: dict[str, int]
    ) -> None:
        """Write an exported state into this (empty) namespace, in one transaction: the
        statistics become the checkpoint, the log starts empty."""
        k = self.keys
        if self.client.exists(k["meta"], k["ckpt"], k["log"], k["offsets"]):
            raise StoreConflict(
                f"namespace {self.namespace!r} already holds state; import into a new namespace"
            )
        compacted = bool(state.vocab_gone.shape[0])
        meta: dict[str, Any] = {
            "fingerprint": json.dumps(state.fingerprint, sort_keys=True),
            "schema": COMPACTED_SCHEMA if compacted else SCHEMA,
            "vocab_checked": state.vocab_checked,
            "seq": 0,
            "ckpt_seq": 0,
        }
        if compacted:
            # a generation no writer can hold: a replica still running with the word ids of
            # the namespace this one replaces is refused as stale; and a lost vocab_gone key
            # is named at start-up (generation > 0)
            meta["vocab_gen"] = IMPORTED_GENERATIONS + secrets.randbelow(IMPORTED_GENERATIONS)
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(k["meta"], mapping=meta)
        pipe.set(k["ckpt"], encode_checkpoint(state.stats, {"seq": 0, "vocab": len(state.vocab)}))
        for i in range(0, len(state.vocab), 10_000):
            chunk = state.vocab[i : i + 10_000]
            pipe.rpush(k["vocab"], *chunk)
            pipe.hset(k["vocab_idx"], mapping={w: i + j for j, w in enumerate(chunk)})
        if state.vocab_gone.shape[0]:
            pipe.set(k["vocab_gone"], state.vocab_gone.astype("<u8").tobytes())
        if state.offsets:
            pipe.hset(k["offsets"], mapping=state.offsets)
        if state.counters:
            pipe.hset(k["counters"], mapping=state.counters)
        if uidnext:
            pipe.hset(k["uidnext"], mapping=uidnext)
        pipe.set(k["novelty"], json.dumps(state.novelty, separators=(",", ":")))
        for i in range(0, len(outbox), OUTBOX_ENTRY_EVENTS):
            part = outbox[i : i + OUTBOX_ENTRY_EVENTS]
            pipe.xadd(k["outbox"], {str(j): stored_json(e) for j, e in enumerate(part)})
        pipe.execute()

    # ---- per batch ------------------------------------------------------------------------
    def intern(self, state: NamespaceState, known: int, new_words: list[str]) -> list[str]:
        """Global ids for words this writer has not seen: returns the namespace's vocabulary
        from index ``known`` on (``new_words`` in order unless another writer added words
        meanwhile) and keeps ``state.vocab`` equal to it."""
        try:
            interned = self._intern(
                keys=[self.keys["vocab"], self.keys["vocab_idx"], self.keys["meta"]],
                args=[known, self.vocab_gen, *new_words],
            )
        except redis.exceptions.ResponseError as exc:
            if "NOVELD_STALE" in str(exc):
                raise StaleVocabulary(
                    f"namespace {self.namespace!r}: {str(exc).split(' ', 1)[1]}"
                ) from exc
            if "NOVELD_VOCAB" not in str(exc):
                raise
            if not self.has_state():
                raise self._lost() from exc  # the whole namespace went, not only its vocab
            raise StoreConflict(
                f"namespace {self.namespace!r}: {str(exc).split(' ', 1)[1]} (its vocab key "
                "is gone or cut)"
            ) from exc
        tail = [_text(w) for w in interned]
        del state.vocab[known:]
        state.vocab.extend(tail)
        return tail

    def before_batch(self, state: NamespaceState, first_offsets: dict[str, int]) -> None:
        """Point the model's uid counter at this batch's uid slot."""
        slot = uid_slot(list(first_offsets))
        if slot != self._slot:
            raw = self.client.hget(self.keys["uidnext"], str(slot))
            self._uid_next = 0 if raw is None else self._count("uidnext", str(slot), raw)
            self._slot = slot
        state.stats.ictl[kern.NEXT_UID] = (slot << UID_SLOT_BITS) + self._uid_next

    def commit(self, state: NamespaceState, request: CommitRequest) -> CommitOutcome:
        """One atomic Lua call: fence, offsets check, uid slot, log entry, counters, outbox;
        then take in what other writers appended since this writer's previous commit."""
        if request.delta is None:
            slot, uid_end = -1, 0  # no document was seated: no uids were handed out
        elif self._slot is None:
            raise StoreConflict("before_batch() was not called for this batch's partitions")
        else:
            slot = self._slot
            used = int(state.stats.ictl[kern.NEXT_UID]) - (slot << UID_SLOT_BITS)
            uid_end = max(used, self._uid_next)
        header = {
            "epochs": {k: self.epochs.get(k, 0) for k in request.first_offsets},
            "first": request.first_offsets,
            "next": request.next_offsets,
            "counters": request.counters,
            "slot": slot,
            "uid_start": self._uid_next if slot >= 0 else 0,
            "uid_end": uid_end,
            "writer": self.writer,
            "last_seq": self.last_seq,
            "vocab_gen": self.vocab_gen,
            "outbox_chunk": OUTBOX_ENTRY_EVENTS,
            "lifecycle": lifecycle_marks(request.events, request.if_announced),
            "lease_ms": self.lease_ms,
        }
        blob = b"" if request.delta is None else encode_delta(request.delta)
        events = [event_json(e) for e in request.events]
        self.suppressed = []
        self.vocabulary_moved = False
        status, detail, seq, foreign, suppressed = self._commit(
            keys=[self.keys[n] for n in ("meta", "counters", "offsets", "epochs", "outbox")]
            + [self.keys[n] for n in ("log", "uidnext", "novelty", "lifecycle", "lease")],
            args=[
                json.dumps(header, separators=(",", ":")),
                blob,
                json.dumps(request.novelty or {}, separators=(",", ":")),
                *events,
            ],
        )
        outcome = _text(status)
        if outcome == "lost":
            raise self._lost()
        if outcome == "conflict":
            raise StoreConflict.from_commit(_text(detail))
        self.lease_refusal = _text(detail) if _text(detail).startswith(_LEASE_MARK) else ""
        if outcome != "committed":
            return _STATUS[outcome]
        if slot >= 0:
            self._uid_next = uid_end
        self.suppressed = [_text(e) for e in suppressed]
        counters = dict(request.counters)
        if self.suppressed:  # the script did not count births another writer announced
            births = counters.get("births", 0) - births_among(request.events, self.suppressed)
            counters["births"] = births
        state.offsets.update(request.next_offsets)
        for k, v in counters.items():
            state.counters[k] = state.counters.get(k, 0) + v
        seq, foreign = int(seq), int(foreign)
        own = seq if blob else None
        if foreign > 0:
            self._apply_foreign(state, self.last_seq, seq if own is None else seq - 1)
            if self.last_seq >= seq:  # reloaded: already includes everything up to seq
                return CommitOutcome.COMMITTED
        self.last_seq = seq
        if own is not None and seq % self.checkpoint_every == 0:
            self.checkpoint(state)
        return CommitOutcome.COMMITTED

    def _apply_foreign(self, state: NamespaceState, after: int, upto: int) -> None:
        """Apply other writers' log entries (after, upto] to the in-memory statistics. If a
        checkpoint trimmed some of them, or another writer compacted the vocabulary since
        this writer's commit, load the namespace afresh instead; after a compaction
        :attr:`vocabulary_moved` tells the caller its word ids changed."""
        gen = self.vocab_gen
        entries = self.client.xrange(self.keys["log"], f"{after + 1}-0", f"{upto}-1")
        seqs = [int(_text(i).split("-")[0]) for i, _ in entries]
        try:
            if seqs != list(range(after + 1, upto + 1)):
                raise _Trimmed  # a checkpoint trimmed entries this replica had not read
            deltas = [self._delta(sid, fields) for sid, fields in entries]
            width = max(
                (int(d.word_ids.max()) + 1 for d in deltas if d.word_ids.shape[0]), default=0
            )
            if width > len(state.vocab):
                self.intern(state, len(state.vocab), [])
            for (sid, _), d in zip(entries, deltas, strict=True):
                self._check_delta(sid, d, len(state.vocab))
        except (_Trimmed, StaleVocabulary):
            fresh = self._read_state(state.fingerprint)
            if fresh is None:
                raise StoreConflict(
                    f"namespace {self.namespace!r} vanished while running"
                ) from None
            state.stats, state.vocab, state.vocab_gone = fresh.stats, fresh.vocab, fresh.vocab_gone
            state.vocab_checked = fresh.vocab_checked
            self.reloads += 1
            self.vocabulary_moved = self.vocab_gen != gen
            if self.vocabulary_moved:  # the caller rebuilds from it: all of it, as a load
                state.novelty, state.offsets, state.counters = (
                    fresh.novelty, fresh.offsets, fresh.counters,
                )  # fmt: skip
            return
        for d in deltas:
            replay_delta(
                state.stats, d, self.half_life_docs, uncounted=lambda: uncounted_ids(state.vocab)
            )

    def checkpoint(self, state: NamespaceState) -> bool:
        """Store the in-memory statistics as of ``last_seq`` and trim the log behind the
        previous checkpoint; False if someone already checkpointed at or after it."""
        blob = encode_checkpoint(state.stats, {"seq": self.last_seq, "vocab": len(state.vocab)})
        written = self._checkpoint(
            keys=[self.keys["meta"], self.keys["ckpt"], self.keys["log"]],
            args=[self.last_seq, blob, self.vocab_gen],
        )
        return bool(int(written))

    def compact_vocabulary(
        self,
        state: NamespaceState,
        stats: MultinomialStats,
        vocab: list[str],
        gone: np.ndarray,
        novelty: dict[str, Any],
    ) -> bool:
        """Stage the renumbered vocabulary, then swap it in with the renumbered statistics as
        the checkpoint, in one script that first checks that the namespace is where this
        writer's statistics are (no commit, word or compaction since); the log, in old ids, is
        trimmed and the generation moves on, so other writers reload (``stale``)."""
        k = self.keys
        listed, indexed = self.staging
        pipe = self.client.pipeline(transaction=False)
        pipe.unlink(listed, indexed)
        for i in range(0, len(vocab), 10_000):
            chunk = vocab[i : i + 10_000]
            pipe.rpush(listed, *chunk)
            pipe.hset(indexed, mapping={w: i + j for j, w in enumerate(chunk)})
        pipe.expire(listed, STAGING_TTL_S)
        pipe.expire(indexed, STAGING_TTL_S)
        pipe.execute()
        blob = encode_checkpoint(stats, {"seq": self.last_seq, "vocab": len(vocab)})
        names = ["meta", "ckpt", "log", "vocab", "vocab_idx"]
        done = self._compact(
            keys=[k[n] for n in names] + [listed, indexed, k["vocab_gone"], k["novelty"]],
            args=[
                self.last_seq,
                self.vocab_gen,
                len(state.vocab),
                len(vocab),
                blob,
                gone.astype("<u8").tobytes(),
                json.dumps(novelty, separators=(",", ":")),
            ],
        )
        if not int(done):
            return False
        self.vocab_gen += 1
        state.stats, state.vocab, state.vocab_gone, state.novelty = stats, vocab, gone, novelty
        state.vocab_checked = len(vocab)
        return True

    def _home_client(self) -> Any:
        """A client of the namespace's server: the node of its hash slot on a cluster."""
        if self.clustered:
            return self.client.get_redis_connection(
                self.client.get_node_from_key(self.keys["meta"])
            )
        return self.client

    def _on_home_node(self, *command: Any) -> Any:
        """Run a keyless command on the server that holds the namespace (on a cluster: the
        node of its hash slot, as the slot map has it now)."""
        if self.clustered:
            node = self.client.get_node_from_key(self.keys["meta"])
            return self.client.execute_command(*command, target_nodes=node)
        return self.client.execute_command(*command)

    def ping(self) -> None:
        """Round trip to the server that holds the namespace; raises ``redis.RedisError``
        while it is unreachable."""
        self._on_home_node("PING")

    def probe_write(self) -> None:
        """A small write on the namespace's server (a key that expires): raises what a commit
        would meet there — OOM at maxmemory, READONLY on a replica — while reads still work."""
        self.client.set(self.keys["probe"], self.writer, ex=PROBE_TTL_S)

    def unfit_server(self) -> str | None:
        """Why the namespace's server cannot keep the state safely, or None: a read-only
        replica (every commit would be refused), or a ``maxmemory-policy`` that evicts any key
        (the state would lose keys silently). Servers that refuse INFO are not judged."""
        try:
            info = self._on_home_node("INFO", "replication")
            memory = self._on_home_node("INFO", "memory")
        except redis.exceptions.ResponseError:  # INFO disabled or renamed (managed Redis)
            return None
        role = str(info.get("role", "master"))
        if role != "master":
            primary = f"{info.get('master_host', '?')}:{info.get('master_port', '?')}"
            return f"it is a read-only replica of {primary}; point --redis-url at the primary"
        policy = str(memory.get("maxmemory_policy", "noeviction"))
        if policy.startswith("allkeys-"):
            return (
                f"its maxmemory-policy {policy} evicts any key at maxmemory, which would "
                "delete parts of the state without a word; use noeviction (a Redis of its own, "
                "or one that is not a cache)"
            )
        return None

    def persistence_risk(self) -> str | None:
        """What a crash of the namespace's server would take with it, or None when every
        acknowledged commit is on disk (AOF with ``appendfsync always``). Nothing is lost either
        way — the offsets go back with the statistics and the input is read again from there —
        but a Redis that forgets commits makes the daemon redo them, and in Kafka mode a redone
        batch can be cut (and seated) differently from the one whose events went out. Servers
        that refuse INFO or CONFIG (managed Redis) are not judged."""
        try:
            aof = int(self._on_home_node("INFO", "persistence").get("aof_enabled", 0))
            key = "appendfsync" if aof else "save"
            reply = self._on_home_node("CONFIG", "GET", key)
            got = {_text(k): _text(v) for k, v in dict(reply).items()}
            value = got.get(key, "")
        except redis.exceptions.ResponseError:
            return None
        if aof and value == "always":
            return None
        if aof:
            what = f"AOF with appendfsync {value}: a Redis crash loses up to a second of commits"
        elif value.strip():
            what = "RDB snapshots only: a Redis crash loses the commits after its last save"
        else:
            return (
                "Redis persists nothing (no AOF, no RDB saves): a restart loses the namespace and "
                "noveld stops with exit 6; turn on AOF with appendfsync always"
            )
        return (
            f"Redis runs {what}; noveld redoes them from the input, and in Kafka mode "
            "births already published from them can be published again with other contents "
            "under the same event ids. appendfsync always avoids this (one fsync per batch commit)"
        )

    def flush(self, state: NamespaceState) -> None:
        """Commits are durable per the server's AOF policy; wait for the local fsync."""
        # a server without AOF or WAITAOF (Redis < 7.2) has nothing more to wait for; the 1 s
        # bound is why RedisSettings requires socket_timeout_s ≥ 2 s (_timeout_outlasts_waits)
        with contextlib.suppress(redis.ResponseError):
            self._on_home_node("WAITAOF", 1, 0, 1000)

    def flush_due(self) -> bool:
        """Every commit is already in Redis."""
        return False

    def replicated(self) -> bool:
        """Whether every commit so far has reached ``replicas_to_ack`` replicas of the
        namespace's server, so no failover can lose a commit whose events are published.

        Redis replicates asynchronously: a primary that dies can take its last writes with it,
        and the promoted replica then holds older offsets. The daemon re-consumes from those
        (nothing lost), but a re-consumed batch can be cut differently and seat differently, so
        events already published from the lost commit could disagree with the new ones under
        the same ids. Publishing only replicated commits closes that window.

        ``WAIT`` counts the acknowledgements of *this connection's* writes, so a marker write
        and the WAIT go in one pipeline on one connection of the namespace's node; the marker
        follows every earlier commit in the primary's replication stream. After a WAIT that
        comes back short (a replica down or behind) the answer is "no" for
        ``REPLICA_HOLD_S`` without asking, so a lost replica costs one timeout a second rather
        than one per batch."""
        if self.replicas_to_ack == 0:
            return True
        now = time.monotonic()
        if now < self._hold_until:
            return False
        pipe = self._home_client().pipeline(transaction=False)
        pipe.set(self.keys["ack"], self.writer)
        pipe.execute_command("WAIT", self.replicas_to_ack, self.replica_ack_timeout_ms)
        try:
            _, acked = pipe.execute()
        except redis.exceptions.MovedError:  # failed over: the slot lives elsewhere now
            if not self.clustered:
                raise
            self.client.nodes_manager.initialize()  # re-read the slot map; ask again later
            acked = 0
        if int(acked) >= self.replicas_to_ack:
            return True
        self._hold_until = now + REPLICA_HOLD_S
        return False

    # ---- outbox ---------------------------------------------------------------------------
    def outbox_pending(self) -> list[dict[str, Any]]:
        """Events in the outbox stream for this writer to send, oldest first, each with the
        JSON it was stored as (:class:`StoredEvent`): its own commits' events, and those of
        other writers still there :data:`ORPHANED_EVENTS_AFTER_S` after their commit (each
        replica sending every pending event sent many of them twice in normal operation). The
        first call takes every event: a restarted process sends what its predecessor left."""
        out: list[dict[str, Any]] = []
        self._entry_events.clear()
        now_ms: int | None = None
        own = self.writer.encode()
        for sid, fields in self.client.xrange(self.keys["outbox"], "-", "+"):
            writer = fields.get(b"w")
            if self._started and writer is not None and writer != own:  # another's: it sends
                if now_ms is None:
                    sec, usec = self.client.time()
                    now_ms = int(sec) * 1000 + int(usec) // 1000
                if now_ms - int(_text(sid).split("-")[0]) < ORPHANED_EVENTS_AFTER_S * 1000:
                    continue  # unless they were left behind (a writer that died or cannot)
            events = self._stored_events(sid, fields)
            for ev in events:
                self._stream_ids[ev["event_id"]] = sid
            self._entry_events[sid] = {ev["event_id"] for ev in events}
            out += events
        self._started = True
        return out

    def ack(self, event_ids: list[str]) -> None:
        """Remove delivered events from the outbox: an entry goes once all of its events have
        been delivered."""
        done = []
        for e in event_ids:
            sid = self._stream_ids.pop(e, None)
            if sid is None:
                continue
            left = self._entry_events.get(sid)
            if left is not None:
                left.discard(e)
                if not left:
                    del self._entry_events[sid]
                    done.append(sid)
        if done:
            self.client.xdel(self.keys["outbox"], *done)
