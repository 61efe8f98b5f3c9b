"""Parsing and redacting the Redis URLs noveld accepts (``noveld.state.redis_url``)."""

from __future__ import annotations

import pytest

from noveld.daemon.settings import load_settings
from noveld.state.redis_url import SentinelURL, check_url, parse_sentinel_url, redacted


def test_sentinel_url_with_hosts_ports_db_and_credentials() -> None:
    url = "redis+sentinel://u%40x:p%3Aw@s1:26380,s2,[::1]:7000/my%20master/3?sentinel_password=sp"
    assert parse_sentinel_url(url) == SentinelURL(
        sentinels=(("s1", 26380), ("s2", 26379), ("::1", 7000)),
        service="my master",
        db=3,
        username="u@x",
        password="p:w",
        sentinel_username=None,
        sentinel_password="sp",
    )


def test_sentinel_url_minimal_and_password_only() -> None:
    assert parse_sentinel_url("REDIS+SENTINEL://h/svc") == SentinelURL((("h", 26379),), "svc")
    target = parse_sentinel_url("redis+sentinel://:pw@h:1/svc/?sentinel_username=su")
    assert (target.username, target.password, target.db) == (None, "pw", 0)
    assert target.sentinel_username == "su"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("redis+sentinel://h:1", "service name is missing"),
        ("redis+sentinel://h:1/", "service name is missing"),
        ("redis+sentinel://h:1/svc/x", "database must be a number"),
        ("redis+sentinel://h:1/svc/0/extra", "path must be /service or /service/db"),
        ("redis+sentinel://h:0/svc", "bad sentinel port"),
        ("redis+sentinel://h:65536/svc", "bad sentinel port"),
        ("redis+sentinel://h:1,,h:2/svc", "address is empty"),
        ("redis+sentinel://:1/svc", "bad sentinel address"),
        ("redis+sentinel://[::1/svc", "bad sentinel address"),
        ("redis+sentinel://h/svc?password=x", "unknown URL parameter(s) password"),
        ("http://h/0", "scheme must be one of"),
        ("h:6379", "scheme must be one of"),
        ("redis://h:6379/abc", "path must be a database number"),  # redis-py: db 0, quietly
        ("rediss://h/3/x", "path must be a database number"),
    ],
)
def test_unusable_urls_are_refused_with_a_reason(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_url(url)


def test_plain_urls_pass_the_check() -> None:
    for url in ("redis://h:6379/0", "rediss://:pw@h/1", "unix:///run/redis.sock", "redis://h",
                "redis://h/", "redis://h:1/?ssl_ca_certs=/x/ca.pem"):  # fmt: skip
        check_url(url)


def test_redacted_drops_credentials_and_query() -> None:
    assert (
        redacted("redis+sentinel://u:secret@a:1,[::1]:2/svc/2?sentinel_password=s2")
        == "redis+sentinel://a:1,[::1]:2/svc/2"
    )
    assert redacted("redis://:secret@h:7000/1") == "redis://h:7000/1"
    assert redacted("rediss://h/0") == "rediss://h:6379/0"
    assert redacted("unix:///run/r.sock") == "unix:///run/r.sock"
    assert "secret" not in redacted("redis+sentinel://:secret@h:x/svc")  # unparseable


def test_settings_refuse_a_bad_url_without_echoing_the_password() -> None:
    with pytest.raises(ValueError) as info:
        load_settings(None, {"redis": {"url": "redis+sentinel://:hunter2@h:99999/svc"}})
    assert "bad sentinel port" in str(info.value)
    assert "hunter2" not in str(info.value)
