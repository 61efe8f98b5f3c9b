"""A Redis Sentinel group (primary, replicas, sentinels): Redis with Sentinel failover, as
self-hosted deployments run it."""

from __future__ import annotations

import time
from typing import Any

from servers.process import Started
from servers.redis_server import RedisServer, redis_binary, start_replica


class SentinelServer(RedisServer):
    """A Redis Sentinel (the same binary with ``--sentinel``) watching ``primary`` as service
    ``service``; ``quorum`` sentinels must agree it is down."""

    def __init__(
        self,
        primary: RedisServer,
        service: str,
        quorum: int,
        down_after_ms: int = 1000,
        password: str | None = None,
    ) -> None:
        super().__init__(appendonly=False, password=password)
        self.settings = [
            f"sentinel monitor {service} 127.0.0.1 {primary.port} {quorum}",
            f"sentinel down-after-milliseconds {service} {down_after_ms}",
            f"sentinel failover-timeout {service} {10 * down_after_ms}",
        ]
        if primary.password:
            self.settings.append(f"sentinel auth-pass {service} {primary.password}")
        if password:
            self.settings.append(f"requirepass {password}")  # the sentinel's own

    def _args(self) -> list[str]:
        conf = self.dir / "sentinel.conf"  # sentinel rewrites it with what it learns
        if not conf.exists():
            lines = [f"port {self.port}", "bind 127.0.0.1", "protected-mode no"]
            conf.write_text("\n".join([*lines, f"dir {self.dir}", *self.settings, ""]))
        return [self.binary or redis_binary(), str(conf), "--sentinel"]


class RedisSentinelGroup(Started):
    """A primary with ``replicas`` replicas and ``sentinels`` sentinels (quorum: a majority)
    on free loopback ports: Redis with Sentinel failover, as self-hosted deployments run it.
    ``url`` is the ``redis+sentinel://`` URL a client is given."""

    SERVICE = "noveld"

    def __init__(
        self,
        replicas: int = 1,
        sentinels: int = 3,
        down_after_ms: int = 1000,
        password: str | None = None,
        sentinel_password: str | None = None,
    ) -> None:
        self.data_args = ["--repl-diskless-sync-delay", "0"]  # replicas sync at once
        self.primary = RedisServer(extra_args=self.data_args, password=password)
        self.sentinel_password = sentinel_password
        self.n_replicas = replicas
        self.n_sentinels = sentinels
        self.down_after_ms = down_after_ms
        self.replicas: list[RedisServer] = []
        self.sentinels: list[SentinelServer] = []

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{self.SERVICE}/0"

    def start(self, timeout: float = 30.0) -> RedisSentinelGroup:
        """Start the primary and its replicas, then the sentinels; return once every sentinel
        knows the others and the replicas (what a failover needs)."""
        self.primary.start()
        self.replicas = [
            start_replica(self.primary, extra_args=self.data_args) for _ in range(self.n_replicas)
        ]
        quorum = self.n_sentinels // 2 + 1
        self.sentinels = [
            SentinelServer(
                self.primary, self.SERVICE, quorum, self.down_after_ms, self.sentinel_password
            ).start()
            for _ in range(self.n_sentinels)
        ]
        deadline = time.monotonic() + timeout
        seen: list[Any] = []
        while time.monotonic() < deadline:
            seen = []
            for sentinel in self.sentinels:
                with sentinel.client() as c:
                    info = c.sentinel_master(self.SERVICE)
                    seen.append((info["num-other-sentinels"], info["num-slaves"]))
            if all(int(o) == self.n_sentinels - 1 and int(r) == self.n_replicas for o, r in seen):
                return self
            time.sleep(0.1)
        raise RuntimeError(f"the sentinels did not find each other within {timeout:.0f} s: {seen}")

    def stop(self) -> None:
        for server in [*self.sentinels, *self.replicas, self.primary]:
            server.stop()
