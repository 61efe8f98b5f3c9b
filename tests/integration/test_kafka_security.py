"""Kafka and Redis over TLS, and SASL, against real servers (tests/servers/).

The daemon's TLS clients talk to the real broker and the real Redis-protocol server through
``TLSProxy`` (TLS termination, as a load balancer does in production): the broker advertises
only the proxy's port, so every Kafka connection of every client is TLS, verified against a
test CA. SASL logins (PLAIN, SCRAM-SHA-256/512 over TLS) go to ``KafkaSASLProxy``, a Kafka
gateway in front of the real broker, since the bundled tansu cannot hold a SASL user; tansu
with ``--authentication`` still checks that credentials it does not know give a one-line
start-up error, not a hang or a traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import trustme
from cli_runner import NOVELD
from kafka import KafkaConsumer
from kafka.admin import KafkaAdminClient, NewTopic
from servers.kafka_broker import TEST_SESSION_TIMEOUT_MS, KafkaBroker
from servers.kafka_sasl import KafkaSASLProxy
from servers.ports import free_port
from servers.proxies import TLSProxy
from servers.redis_server import RedisServer

from noveld.synth import SynthConfig, write_jsonl


@dataclass(frozen=True)
class TLSServers:
    """A broker and a Redis server reachable only through TLS proxies, and the test CA."""

    kafka: str  # host:port of the broker's TLS proxy
    redis_url: str  # rediss:// URL of the Redis TLS proxy, verifying against the CA
    plain_redis: str  # the server itself, for the test's own checks
    ca: Path
    client: dict[str, Any]  # kafka-python options for the test's own clients


def write_ca(ca: trustme.CA, directory: Path) -> Path:
    path = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return path


def loopback_certificate(directory: Path) -> tuple[Path, Path, Path]:
    """A server certificate for 127.0.0.1/localhost from a new test CA: (cert, key, CA)."""
    ca = trustme.CA()
    leaf = ca.issue_cert("127.0.0.1", "localhost")
    cert, key = directory / "cert.pem", directory / "key.pem"
    leaf.cert_chain_pems[0].write_to_path(str(cert))
    leaf.private_key_pem.write_to_path(str(key))
    return cert, key, write_ca(ca, directory)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TLSServers]:
    d = tmp_path_factory.mktemp("tls")
    cert, key, ca_file = loopback_certificate(d)
    client = {"security_protocol": "SSL", "ssl_cafile": str(ca_file)}
    broker_port = free_port()
    with (
        TLSProxy(broker_port, cert, key) as kafka_proxy,
        KafkaBroker(broker_port, kafka_proxy.port, client) as broker,
        RedisServer() as server,
        TLSProxy(server.port, cert, key) as redis_proxy,
    ):
        yield TLSServers(
            kafka=broker.bootstrap,
            redis_url=f"rediss://127.0.0.1:{redis_proxy.port}/0?ssl_ca_certs={ca_file}",
            plain_redis=server.url,
            ca=ca_file,
            client=client,
        )


def create_topics(tls: TLSServers, ns: str) -> dict[str, str]:
    topics = {"in": f"{ns}.in", "events": f"{ns}.events", "dlq": f"{ns}.dlq"}
    admin = KafkaAdminClient(bootstrap_servers=tls.kafka, **tls.client)
    admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()])
    admin.close()
    return topics


def daemon_args(bootstrap: str, redis_url: str, ns: str, topics: dict[str, str]) -> list[str]:
    return [
        *NOVELD, "run",
        "--kafka-bootstrap", bootstrap,
        "--input-topic", topics["in"],
        "--events-topic", topics["events"],
        "--dlq-topic", topics["dlq"],
        "--group", ns,
        "--redis-url", redis_url,
        "--namespace", ns,
        "--session-timeout-ms", str(TEST_SESSION_TIMEOUT_MS),
    ]  # fmt: skip


def counters(url: str, ns: str) -> dict[str, int]:
    raw = redis.Redis.from_url(url).hgetall(f"noveld:{{{ns}}}:counters")
    return {k.decode(): int(v) for k, v in raw.items()}


def test_the_daemon_runs_over_tls_to_kafka_and_redis(tls: TLSServers, tmp_path: Path) -> None:
    """`noveld produce` and `noveld run` with `--kafka-security-protocol SSL` and a
    `rediss://` URL: every document is counted in Redis, and the births arrive on the events
    topic, read back over TLS."""
    ns = f"t{uuid.uuid4().hex[:6]}"
    topics = create_topics(tls, ns)
    source = tmp_path / "in.jsonl"
    write_jsonl(SynthConfig(n_docs=600, n_stories=6, seed=3), source)
    security = ["--kafka-security-protocol", "SSL", "--kafka-ssl-cafile", str(tls.ca)]
    produced = subprocess.run(
        [*NOVELD, "produce", str(source), "--topic", topics["in"], "--kafka-bootstrap",
         tls.kafka, *security],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    proc = subprocess.Popen(
        [*daemon_args(tls.kafka, tls.redis_url, ns, topics), *security],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "NOVELD_BATCH__MAX_WAIT_MS": "200"},
    )
    deadline = time.monotonic() + 120
    seen: dict[str, int] = {}
    while time.monotonic() < deadline and seen.get("docs", 0) < 600:
        assert proc.poll() is None, proc.communicate()[1]
        seen = counters(tls.plain_redis, ns)
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert seen.get("docs") == 600 and seen.get("births", 0) >= 3, seen
    consumer = KafkaConsumer(
        topics["events"],
        bootstrap_servers=tls.kafka,
        auto_offset_reset="earliest",
        consumer_timeout_ms=5000,
        **tls.client,
    )
    born = [json.loads(m.value) for m in consumer]
    consumer.close()
    assert len([e for e in born if e["type"] == "cluster.born"]) == seen["births"]


def test_an_untrusted_broker_certificate_is_a_clear_start_up_error(
    tls: TLSServers, tmp_path: Path
) -> None:
    """A CA that did not sign the broker's certificate: exit 2 with what to check."""
    ns = f"u{uuid.uuid4().hex[:6]}"
    other_ca = write_ca(trustme.CA(), tmp_path)
    out = subprocess.run(
        [*daemon_args(tls.kafka, tls.redis_url, ns, {"in": "x", "events": "y", "dlq": "z"}),
         "--kafka-security-protocol", "SSL", "--kafka-ssl-cafile", str(other_ca)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert f"cannot reach Kafka at {tls.kafka} (SSL)" in out.stderr
    assert "Traceback" not in out.stderr


def test_credentials_the_broker_rejects_are_a_clear_start_up_error(redis_url: str) -> None:
    """SASL SCRAM against a broker that requires authentication and has no such user."""
    ns = f"s{uuid.uuid4().hex[:6]}"
    with KafkaBroker(authentication=True) as broker:
        out = subprocess.run(
            [*daemon_args(broker.bootstrap, redis_url, ns, {"in": "x", "events": "y", "dlq": "z"}),
             "--kafka-security-protocol", "SASL_PLAINTEXT",
             "--kafka-sasl-mechanism", "SCRAM-SHA-512", "--kafka-sasl-username", "nobody"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "NOVELD_KAFKA__SASL_PASSWORD": "not-this-one"},
        )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert f"cannot reach Kafka at {broker.bootstrap} (SASL_PLAINTEXT)" in out.stderr
    assert "credentials" in out.stderr and "not-this-one" not in out.stderr
    assert "Traceback" not in out.stderr


def test_sasl_settings_without_a_password_are_refused_before_connecting(redis_url: str) -> None:
    out = subprocess.run(
        [*daemon_args("127.0.0.1:1", redis_url, "n", {"in": "x", "events": "y", "dlq": "z"}),
         "--kafka-security-protocol", "SASL_SSL", "--kafka-sasl-mechanism", "PLAIN",
         "--kafka-sasl-username", "svc"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 2
    assert "kafka.sasl_password" in out.stderr and "Traceback" not in out.stderr


@dataclass(frozen=True)
class MutualTLS:
    """A broker behind a proxy that requires a client certificate signed by the test CA."""

    kafka: str
    ca: Path
    cert: Path  # a client certificate the proxy accepts, and its key
    key: Path


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MutualTLS]:
    d = tmp_path_factory.mktemp("mtls")
    ca = trustme.CA()
    server, client = ca.issue_cert("127.0.0.1"), ca.issue_cert("noveld-client")
    paths = {name: d / f"{name}.pem" for name in ("server", "server-key", "client", "client-key")}
    server.cert_chain_pems[0].write_to_path(str(paths["server"]))
    server.private_key_pem.write_to_path(str(paths["server-key"]))
    client.cert_chain_pems[0].write_to_path(str(paths["client"]))
    client.private_key_pem.write_to_path(str(paths["client-key"]))
    ca_file = write_ca(ca, d)
    options = {
        "security_protocol": "SSL",
        "ssl_cafile": str(ca_file),
        "ssl_certfile": str(paths["client"]),
        "ssl_keyfile": str(paths["client-key"]),
    }
    broker_port = free_port()
    with (
        TLSProxy(broker_port, paths["server"], paths["server-key"], client_ca=ca_file) as proxy,
        KafkaBroker(broker_port, proxy.port, options) as broker,
    ):
        yield MutualTLS(broker.bootstrap, ca_file, paths["client"], paths["client-key"])


def test_mutual_tls_presents_the_client_certificate(mtls: MutualTLS, tmp_path: Path) -> None:
    """`--kafka-ssl-certfile/--kafka-ssl-keyfile`: a broker that demands a client certificate
    takes the records; without the certificate the same command is a clear error."""
    topic = f"m{uuid.uuid4().hex[:6]}"
    source = tmp_path / "in.jsonl"
    write_jsonl(SynthConfig(n_docs=50, n_stories=2, seed=1), source)
    tls_flags = ["--kafka-security-protocol", "SSL", "--kafka-ssl-cafile", str(mtls.ca)]
    base = [*NOVELD, "produce", str(source), "--topic", topic, "--kafka-bootstrap", mtls.kafka]
    with_cert = subprocess.run(
        [*base, *tls_flags, "--kafka-ssl-certfile", str(mtls.cert),
         "--kafka-ssl-keyfile", str(mtls.key)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert with_cert.returncode == 0, with_cert.stderr
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=mtls.kafka,
        auto_offset_reset="earliest",
        consumer_timeout_ms=3000,
        security_protocol="SSL",
        ssl_cafile=str(mtls.ca),
        ssl_certfile=str(mtls.cert),
        ssl_keyfile=str(mtls.key),
    )
    assert len(list(consumer)) == 50
    consumer.close()
    without = subprocess.run([*base, *tls_flags], capture_output=True, text=True, timeout=120)
    assert without.returncode == 2
    assert f"cannot reach Kafka at {mtls.kafka} (SSL)" in without.stderr
    assert "Traceback" not in without.stderr


@dataclass(frozen=True)
class SASLServers:
    """A broker reachable only through SASL over TLS (a Kafka gateway in front of it)."""

    kafka: str
    ca: Path
    proxy: KafkaSASLProxy
    client: dict[str, Any]  # kafka-python options for the test's own clients


SASL_USER, SASL_PASSWORD = "noveld", "c0rrect-h0rse"


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SASLServers]:
    d = tmp_path_factory.mktemp("sasl")
    cert, key, ca_file = loopback_certificate(d)
    client = {
        "security_protocol": "SASL_SSL",
        "ssl_cafile": str(ca_file),
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": SASL_USER,
        "sasl_plain_password": SASL_PASSWORD,
    }
    broker_port = free_port()
    with (
        KafkaSASLProxy(broker_port, {SASL_USER: SASL_PASSWORD}, cert, key) as proxy,
        KafkaBroker(broker_port, proxy.port, client) as broker,
    ):
        yield SASLServers(broker.bootstrap, ca_file, proxy, client)


def sasl_flags(sasl: SASLServers, mechanism: str) -> list[str]:
    return [
        "--kafka-security-protocol", "SASL_SSL", "--kafka-sasl-mechanism", mechanism,
        "--kafka-sasl-username", SASL_USER, "--kafka-ssl-cafile", str(sasl.ca),
    ]  # fmt: skip


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_produce_logs_in_with_each_sasl_mechanism(
    sasl: SASLServers, tmp_path: Path, mechanism: str
) -> None:
    """`noveld produce` over SASL_SSL, the password from the environment: the gateway sees a
    login of that mechanism and user, and the records arrive."""
    topic = f"p{uuid.uuid4().hex[:6]}"
    source = tmp_path / "in.jsonl"
    write_jsonl(SynthConfig(n_docs=40, n_stories=2, seed=2), source)
    before = len(sasl.proxy.logins)
    out = subprocess.run(
        [*NOVELD, "produce", str(source), "--topic", topic, "--kafka-bootstrap", sasl.kafka,
         *sasl_flags(sasl, mechanism)],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "NOVELD_KAFKA__SASL_PASSWORD": SASL_PASSWORD},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert (mechanism, SASL_USER) in sasl.proxy.logins[before:]
    consumer = KafkaConsumer(
        topic, bootstrap_servers=sasl.kafka, auto_offset_reset="earliest",
        consumer_timeout_ms=3000, **sasl.client,
    )  # fmt: skip
    assert len(list(consumer)) == 40
    consumer.close()


def test_the_daemon_runs_over_sasl_ssl(sasl: SASLServers, redis_url: str, tmp_path: Path) -> None:
    """The daemon's consumer and events producer log in with SCRAM-SHA-512 (password from the
    environment): every document counted, the births on the events topic."""
    ns = f"q{uuid.uuid4().hex[:6]}"
    topics = {"in": f"{ns}.in", "events": f"{ns}.events", "dlq": f"{ns}.dlq"}
    admin = KafkaAdminClient(bootstrap_servers=sasl.kafka, **sasl.client)
    admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()])
    admin.close()
    source = tmp_path / "in.jsonl"
    write_jsonl(SynthConfig(n_docs=500, n_stories=5, seed=6), source)
    env = {**os.environ, "NOVELD_KAFKA__SASL_PASSWORD": SASL_PASSWORD}
    flags = sasl_flags(sasl, "SCRAM-SHA-512")
    produced = subprocess.run(
        [*NOVELD, "produce", str(source), "--topic", topics["in"], "--kafka-bootstrap",
         sasl.kafka, *flags],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    before = len(sasl.proxy.logins)
    proc = subprocess.Popen(
        [*daemon_args(sasl.kafka, redis_url, ns, topics), *flags],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**env, "NOVELD_BATCH__MAX_WAIT_MS": "200"},
    )
    try:
        deadline = time.monotonic() + 120
        seen: dict[str, int] = {}
        while time.monotonic() < deadline and seen.get("docs", 0) < 500:
            assert proc.poll() is None, proc.communicate()[1]
            seen = counters(redis_url, ns)
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert seen.get("docs") == 500 and seen.get("births", 0) >= 3, seen
    assert ("SCRAM-SHA-512", SASL_USER) in sasl.proxy.logins[before:]
    consumer = KafkaConsumer(
        topics["events"], bootstrap_servers=sasl.kafka, auto_offset_reset="earliest",
        consumer_timeout_ms=5000, **sasl.client,
    )  # fmt: skip
    born = [json.loads(m.value) for m in consumer]
    consumer.close()
    assert len([e for e in born if e["type"] == "cluster.born"]) == seen["births"]


def test_a_wrong_sasl_password_is_a_clear_start_up_error(sasl: SASLServers, tmp_path: Path) -> None:
    """The gateway knows the user but not this password: exit 2, the password not echoed."""
    source = tmp_path / "in.jsonl"
    write_jsonl(SynthConfig(n_docs=5, n_stories=1, seed=1), source)
    refused = sasl.proxy.refused
    out = subprocess.run(
        [*NOVELD, "produce", str(source), "--topic", "w", "--kafka-bootstrap", sasl.kafka,
         *sasl_flags(sasl, "SCRAM-SHA-256")],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "NOVELD_KAFKA__SASL_PASSWORD": "not-the-password"},
    )  # fmt: skip
    assert out.returncode == 2, out.stderr
    assert f"cannot reach Kafka at {sasl.kafka} (SASL_SSL)" in out.stderr
    assert "not-the-password" not in out.stderr and "Traceback" not in out.stderr
    assert sasl.proxy.refused > refused  # the gateway did refuse a login
