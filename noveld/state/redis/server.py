"""The namespace's server as such: reachable, writable, fit to keep state (no read-only replica,
no evicting policy), how durable (AOF, WAITAOF) and how replicated (WAIT) its commits are."""

from __future__ import annotations

import contextlib
import time

import redis

from noveld.state.base import NamespaceState
from noveld.state.redis.core import StoreCore
from noveld.state.redis.values import text

REPLICA_HOLD_S = 1.0  # after a short WAIT, hold events this long before asking again
PROBE_TTL_S = 60  # the write probe's key expires: it is not state


class Server(StoreCore):
    """Ask the namespace's server about itself."""

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
            got = {text(k): text(v) for k, v in dict(reply).items()}
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
