"""A Redis Cluster of real servers (slots split evenly, optional replicas), and the failover
topologies (cluster or sentinel) the failover tests run against."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis

from servers.ports import cluster_port
from servers.process import Started
from servers.redis_server import RedisServer
from servers.sentinel import RedisSentinelGroup


class RedisClusterServers(Started):
    """A Redis Cluster of ``size`` primaries on free loopback ports, the 16,384 hash slots split
    evenly between them: the production layout of a managed Redis in cluster mode. ``url`` is
    the first node's, as a client would be given a configuration endpoint. With ``replicas``
    each primary gets that many replicas (``replicas_of``), which take over when it fails
    (after ``node_timeout_ms``), as in a managed service with automatic failover."""

    SLOTS = 16384

    def __init__(self, size: int = 3, replicas: int = 0, node_timeout_ms: int = 15000) -> None:
        args = [
            "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
            "--cluster-node-timeout", str(node_timeout_ms),
            "--repl-diskless-sync-delay", "0",  # replicas sync at once, not after 5 s
        ]  # fmt: skip
        self.size = size
        self.servers = [
            RedisServer(cluster_port(), extra_args=args) for _ in range(size * (1 + replicas))
        ]
        self.primaries = self.servers[:size]

    @property
    def url(self) -> str:
        return self.servers[0].url

    def node_of(self, key: str) -> RedisServer:
        """The server that held ``key``'s hash slot when the cluster was formed."""
        from redis.crc import key_slot

        slot = key_slot(key.encode())
        return self.primaries[slot * self.size // self.SLOTS]

    def replicas_of(self, primary: RedisServer) -> list[RedisServer]:
        """The replicas given to ``primary`` when the cluster was formed."""
        i = self.primaries.index(primary)
        return self.servers[self.size + i :: self.size]

    def start(self, timeout: float = 30.0) -> RedisClusterServers:
        """Start the nodes, assign the slots, introduce the nodes, attach the replicas, wait for
        ``cluster_state:ok`` on every node and every replica's initial sync."""
        for server in self.servers:
            server.start()
        clients = [server.client() for server in self.servers]
        n = self.size
        for i, client in enumerate(clients[:n]):
            first, last = i * self.SLOTS // n, (i + 1) * self.SLOTS // n - 1
            client.execute_command("CLUSTER", "ADDSLOTSRANGE", first, last)
        for server in self.servers[1:]:
            clients[0].execute_command("CLUSTER", "MEET", "127.0.0.1", server.port)
        ids = [client.execute_command("CLUSTER", "MYID") for client in clients[:n]]
        deadline = time.monotonic() + timeout
        unattached = list(range(n, len(clients)))
        states: list[Any] = []
        while time.monotonic() < deadline:
            for j in list(unattached):
                try:  # fails until the replica has heard of its primary through the gossip
                    clients[j].execute_command("CLUSTER", "REPLICATE", ids[j % n])
                    unattached.remove(j)
                except redis.ResponseError:
                    pass
            states = [client.execute_command("CLUSTER", "INFO") for client in clients]
            synced = all(
                client.info("replication").get("master_link_status") == "up"
                for client in clients[n:]
            )
            if not unattached and synced and all(b"cluster_state:ok" in st for st in states):
                for client in clients:
                    client.close()
                return self
            time.sleep(0.1)
        raise RuntimeError(f"the cluster did not form within {timeout:.0f} s: {states}")

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


@dataclass
class Failover:
    """A Redis with failover: the URL a client is given, the primary that holds a namespace,
    and the replica that takes over when it dies."""

    url: str
    home: RedisServer
    replica: RedisServer


@contextmanager
def failover_topology(kind: str, namespace: str) -> Iterator[Failover]:
    """``cluster``: three shards with a replica each (node timeout 2 s), the client given
    another shard's address (a configuration endpoint). ``sentinel``: a primary, its replica and
    three sentinels (down-after 1 s), the client given the sentinels (``redis+sentinel://``)."""
    if kind == "cluster":
        with RedisClusterServers(3, replicas=1, node_timeout_ms=2000) as cluster:
            home = cluster.node_of(f"noveld:{{{namespace}}}:meta")
            (replica,) = cluster.replicas_of(home)
            entry = next(s for s in cluster.primaries if s is not home)
            yield Failover(entry.url, home, replica)
    elif kind == "sentinel":
        with RedisSentinelGroup(replicas=1, sentinels=3, down_after_ms=1000) as group:
            yield Failover(group.url, group.primary, group.replicas[0])
    else:
        raise ValueError(f"unknown failover topology {kind!r}")
