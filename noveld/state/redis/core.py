"""What every part of the Redis store shares: the client, the namespace's keys and scripts, this
writer's place in the namespace (log position, vocabulary generation, claims), and transactions
that check each key's type before trusting its replies."""

from __future__ import annotations

import uuid
from importlib.resources import files
from typing import Any

import redis
from redis.cluster import RedisCluster

from noveld.state.redis.keys import (
    CHECKPOINT_EVERY,
    KEY_TYPES,
    key_prefix,
    namespace_keys,
    staging_keys,
)
from noveld.state.redis.values import StoredValues, text

_LUA = files("noveld.state.redis")


class StoreCore(StoredValues):
    """A namespace's keys in Redis (a server or a cluster) as seen by one writer; the store's
    parts build on it."""

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
        self.prefix = key_prefix(namespace)
        self.keys = namespace_keys(namespace)
        self._commit = client.register_script(_LUA.joinpath("commit.lua").read_text())
        self._intern = client.register_script(_LUA.joinpath("intern.lua").read_text())
        self._checkpoint = client.register_script(_LUA.joinpath("checkpoint.lua").read_text())
        self._compact = client.register_script(_LUA.joinpath("compact.lua").read_text())
        self.checkpoint_every = checkpoint_every
        self.writer = uuid.uuid4().hex[:12]
        self._started = False  # outbox_pending has taken over what earlier writers left
        # this writer's own staging keys for a compaction (writers compacting at once must not
        # append to one list), dropped by the script or, after a crash, by their expiry
        self.staging = staging_keys(namespace, self.writer)
        self.epochs: dict[str, int] = {}
        self.last_seq = 0  # log entries reflected in the caller's in-memory statistics
        #: the caller's story summaries are the stored ones (no other writer committed since
        #: the load): the commit script may take this writer's folded entries as they are
        self.stories_in_step = False
        self._stories_applied: Any = None  # the change last applied to the caller's table
        self.vocab_gen = 0  # compactions of the vocabulary as of the caller's word ids
        self.half_life_docs = 0.0
        self._slot: int | None = None
        self._uid_next = 0  # counter of the current slot
        self._stream_ids: dict[str, bytes] = {}  # event id → its outbox entry
        self._entry_events: dict[bytes, set[str]] = {}  # outbox entry → events not yet acked
        self.reloads = 0  # times this replica fell behind a checkpoint and reloaded
        self.refreshed = 0  # other writers' entries applied before seating (refresh)
        #: whether this writer's last commit or refresh found other writers' entries: the
        #: pre-seat refresh reads only then (a lone writer makes no extra round trip)
        self.others_writing = True
        self._seen_others = False  # a refresh since the last commit found others' entries
        self.replicas_to_ack = replicas_to_ack
        self.replica_ack_timeout_ms = replica_ack_timeout_ms
        self._hold_until = 0.0  # after a short WAIT, answer "not replicated" until then
        self.shared_announcements = True  # replicas of one namespace announce its clusters
        # > 0: one writer at a time (svi, whose global step does not commute); every
        # commit then checks that no other writer holds the lease, and renews it for this long
        self.lease_ms = 0

    def _typed_transaction(self) -> Any:
        """A transaction that begins by asking each key's type (:meth:`_execute_typed`)."""
        pipe = self.client.pipeline(transaction=True)
        for name in KEY_TYPES:
            pipe.type(self.keys[name])
        return pipe

    def _execute_typed(self, pipe: Any) -> list[Any]:
        """Run a :meth:`_typed_transaction`: the replies after the types, once every existing
        key is of its type — a key of another type is damage, not an outage (its WRONGTYPE
        reply would otherwise read as "Redis unreachable")."""
        replies = pipe.execute(raise_on_error=False)
        for (name, want), got in zip(KEY_TYPES.items(), replies, strict=False):
            if isinstance(got, Exception):
                raise got
            if text(got) not in ("none", want):
                raise self._damaged(name, f"is a Redis {text(got)}, not a {want}")
        rest: list[Any] = replies[len(KEY_TYPES) :]
        for reply in rest:
            if isinstance(reply, Exception):
                raise reply
        return rest

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
