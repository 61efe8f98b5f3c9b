"""``kafka.security_protocol`` and friends: what reaches kafka-python, and which combinations
are refused at start-up (tests/integration/test_kafka_security.py runs them against servers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from noveld.daemon.cli import _overrides, build_parser
from noveld.daemon.settings import KafkaSettings, load_settings


def kafka(**given: Any) -> KafkaSettings:
    return load_settings(None, {"kafka": {"bootstrap_servers": "b:9092", **given}}).kafka


@pytest.fixture
def pem(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


def test_plaintext_adds_nothing_to_the_clients() -> None:
    assert kafka().client_options() == {}


def test_sasl_ssl_passes_every_setting_and_the_password_in_clear_only_to_the_client(
    pem: Path,
) -> None:
    k = kafka(
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-256",
        sasl_username="svc",
        sasl_password="pw",
        ssl_cafile=str(pem),
    )
    assert k.client_options() == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "svc",
        "sasl_plain_password": "pw",
        "ssl_check_hostname": True,
        "ssl_cafile": str(pem),
    }
    assert "pw" not in repr(k) and "pw" not in str(k.model_dump())


def test_mutual_tls_passes_the_client_certificate(pem: Path) -> None:
    k = kafka(
        security_protocol="SSL",
        ssl_certfile=str(pem),
        ssl_keyfile=str(pem),
        ssl_check_hostname=False,
    )
    assert k.client_options() == {
        "security_protocol": "SSL",
        "ssl_check_hostname": False,
        "ssl_certfile": str(pem),
        "ssl_keyfile": str(pem),
    }


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"security_protocol": "SASL_PLAINTEXT"}, "needs kafka.sasl_mechanism"),
        (
            {"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN", "sasl_username": "u"},
            "needs kafka.sasl_password",
        ),
        ({"sasl_username": "u"}, "kafka.sasl_username is set but security_protocol is PLAINTEXT"),
        ({"ssl_cafile": "PEM"}, "kafka.ssl_cafile is set but security_protocol is PLAINTEXT"),
        ({"security_protocol": "SSL", "ssl_cafile": "/no/such.pem"}, "no such file"),
        ({"security_protocol": "SSL", "ssl_keyfile": "PEM"}, "needs kafka.ssl_certfile"),
        ({"security_protocol": "TLS"}, "PLAINTEXT"),
        ({"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI"}, "SCRAM-SHA-512"),
    ],
)
def test_inconsistent_security_settings_are_refused(
    pem: Path, given: dict[str, Any], message: str
) -> None:
    given = {k: str(pem) if v == "PEM" else v for k, v in given.items()}
    with pytest.raises(ValidationError, match=message) as info:
        kafka(**given)
    assert all(e["loc"][0] == "kafka" for e in info.value.errors())


def test_a_password_from_the_environment_joins_a_protocol_from_the_flags(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The checks see the merged layers: the password may come from the environment while
    the protocol and the user come from flags."""
    monkeypatch.setenv("NOVELD_KAFKA__SASL_PASSWORD", "from-env")
    args = build_parser().parse_args(
        [
            "run",
            "--kafka-bootstrap", "b:9092",
            "--kafka-security-protocol", "SASL_PLAINTEXT",
            "--kafka-sasl-mechanism", "PLAIN",
            "--kafka-sasl-username", "svc",
        ]
    )  # fmt: skip
    k = load_settings(None, _overrides(args)).kafka
    assert k.client_options()["sasl_plain_password"] == "from-env"


def test_without_kafka_a_stray_secret_in_the_environment_is_harmless(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOVELD_KAFKA__SASL_PASSWORD", "shared")
    assert load_settings(None, {}).kafka.bootstrap_servers is None
