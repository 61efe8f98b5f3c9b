"""An unreachable ``--kafka-bootstrap`` is said in one line: kafka-python's own log of each
failed attempt (a score of relabelled WARNING/ERROR lines) stays quiet while a client starts."""

from __future__ import annotations

from cli_runner import noveld
from servers.ports import free_port


def _only_the_useful_line(stderr: str, bootstrap: str) -> None:
    # the test Redis's persistence warning is not Kafka's
    lines = [line for line in stderr.splitlines() if not line.startswith("noveld: warning: Redis")]
    assert "kafka.net" not in stderr and "kafka.conn" not in stderr, stderr
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"noveld: error: cannot reach Kafka at {bootstrap} (PLAINTEXT)")


def test_produce_to_an_unreachable_broker_says_one_line() -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    out = noveld("produce", "-", "--topic", "t", "--kafka-bootstrap", bootstrap,
                 input_text='{"id": "a", "text": "b"}\n', timeout=120)  # fmt: skip
    assert out.returncode == 2
    _only_the_useful_line(out.stderr, bootstrap)


def test_run_against_an_unreachable_broker_says_one_line(redis_url: str) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    out = noveld("run", "--kafka-bootstrap", bootstrap, "--redis-url", redis_url,
                 "--input-topic", "docs", "--namespace", "quiet", timeout=120)  # fmt: skip
    assert out.returncode == 2, out.stderr
    _only_the_useful_line(out.stderr, bootstrap)
