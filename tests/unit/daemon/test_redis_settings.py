"""The Redis section's timeouts: a reply timeout that outlasts every legitimate wait."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from noveld.daemon.cli import _overrides, build_parser
from noveld.daemon.settings import load_settings


def test_socket_timeout_default_and_flag() -> None:
    assert load_settings(None, {}).redis.socket_timeout_s == 10.0
    ns = build_parser().parse_args(["run", "--redis-socket-timeout", "4.5"])
    assert load_settings(None, _overrides(ns)).redis.socket_timeout_s == 4.5


def test_socket_timeout_must_outlast_the_waits() -> None:
    with pytest.raises(ValidationError, match="greater than or equal to 2"):
        load_settings(None, {"redis": {"socket_timeout_s": 1.0}})
    # a WAIT for the replicas may block 20 s: a 10 s reply timeout would call Redis dead
    with pytest.raises(ValidationError, match="must be at least 21 s"):
        load_settings(None, {"redis": {"replica_ack_timeout_ms": 20_000}})
    ok = load_settings(None, {"redis": {"replica_ack_timeout_ms": 20_000, "socket_timeout_s": 21}})
    assert ok.redis.socket_timeout_s == 21


@pytest.mark.parametrize("query", ["foo=bar", "ssl_cert_reqs=bogus"])
def test_a_redis_url_option_redis_py_cannot_use_is_one_line_and_exit_2(
    query: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Found at the first connection (redis-py takes the query as connection options): named,
    the password not shown, no traceback."""
    from noveld.daemon.cli import main

    url = f"redis://:s3cret@127.0.0.1:1/0?{query}"
    assert main(["state", "show", "--redis-url", url]) == 2
    err = capsys.readouterr().err
    assert "bad Redis URL" in err and query.split("=")[0] in err
    assert "s3cret" not in err and err.count("\n") == 1
