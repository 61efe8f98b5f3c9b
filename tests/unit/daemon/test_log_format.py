"""Log records on stderr look like noveld's other messages, and never carry a traceback: a
library (kafka-python) logs a dropped broker connection with its exception attached."""

from __future__ import annotations

import logging

import pytest

from noveld.daemon.cli import configure_logging


@pytest.fixture
def logging_configured() -> object:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    configure_logging()
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)


def test_a_library_record_with_an_exception_is_one_line_naming_it(
    logging_configured: object, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        raise ConnectionResetError(104, "Connection reset by peer")
    except ConnectionResetError:
        logging.getLogger("kafka.coordinator").error("Heartbeat failed", exc_info=True)
    err = capsys.readouterr().err
    assert err == (
        "noveld: error: kafka.coordinator: Heartbeat failed "
        "(ConnectionResetError: [Errno 104] Connection reset by peer)\n"
    )


def test_noveld_records_say_their_level_and_libraries_below_warning_stay_quiet(
    logging_configured: object, capsys: pytest.CaptureFixture[str]
) -> None:
    logging.getLogger("noveld.pipeline").info("compacted the vocabulary")
    logging.getLogger("kafka.conn").info("connecting")
    try:
        raise TimeoutError
    except TimeoutError:
        logging.getLogger("noveld.kafka_mode").warning("slow", exc_info=True)
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "noveld: info: compacted the vocabulary",
        "noveld: warning: slow (TimeoutError)",
    ]


def test_kafkas_connection_attempts_stay_quiet_below_critical(
    logging_configured: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unreachable broker: kafka-python's IO thread logs each attempt for as long as the
    client lives; noveld says it once itself."""
    logging.getLogger("kafka.net.manager").error("Connection failed: KafkaConnectionError: 111")
    logging.getLogger("kafka.conn").warning("connect attempt to 127.0.0.1:9 failed")
    logging.getLogger("kafka.net.connection").error("Connection lost: KafkaConnectionError: 111")
    logging.getLogger("kafka.net.transport").error("Error receiving network data closing socket")
    logging.getLogger("kafka.net.manager").critical("gave up")
    assert capsys.readouterr().err == "noveld: critical: kafka.net.manager: gave up\n"
