"""Log records on stderr in the command line's own form (``noveld: warning: …``), never as a
traceback."""

from __future__ import annotations

import logging
import sys
from typing import Any


class _LogFormat(logging.Formatter):
    """A log record as the command line's other messages look: ``noveld: warning: …`` (a
    library's record also names its logger). A record's exception is named on the same line,
    never as a traceback: kafka-python logs a dropped broker connection with ``exc_info``, and
    an operator read a stack trace into a routine reconnect."""

    def format(self, record: logging.LogRecord) -> str:
        where = "" if record.name.startswith("noveld") else f"{record.name}: "
        text = f"noveld: {record.levelname.lower()}: {where}{record.getMessage()}"
        exc = record.exc_info[1] if record.exc_info else None
        if exc is not None:
            text += f" ({type(exc).__name__}: {exc})" if str(exc) else f" ({type(exc).__name__})"
        return text


#: kafka-python's loggers of each connection attempt and dropped socket: a broker that cannot
#: be reached logs a line per attempt, from its IO thread, for as long as the client lives
_KAFKA_ATTEMPT_LOGGERS = (
    "kafka.conn",
    "kafka.net.manager",
    "kafka.net.connection",
    "kafka.net.transport",
)


def _not_a_kafka_attempt(record: logging.LogRecord) -> bool:
    """Leave out kafka-python's per-attempt connection lines (below CRITICAL): noveld says
    itself when Kafka cannot be reached (``kafka_unreachable``, ``noveld_kafka_reachable``)."""
    if record.levelno >= logging.CRITICAL:
        return True
    return not record.name.startswith(_KAFKA_ATTEMPT_LOGGERS)


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (a plain StreamHandler keeps
    the stream it was made with, e.g. a test's captured stderr long closed)."""

    @property
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(quiet: bool = False) -> None:
    """Log records to stderr, noveld's from INFO (``--quiet``: WARNING), libraries' from
    WARNING. Unconfigured, Python's last-resort handler printed bare messages without a level
    and dropped INFO (a vocabulary compaction went unsaid)."""
    root = logging.getLogger()
    if not any(isinstance(h.formatter, _LogFormat) for h in root.handlers):
        handler = _StderrHandler()
        handler.setFormatter(_LogFormat())
        handler.addFilter(_not_a_kafka_attempt)
        root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.WARNING:
        root.setLevel(logging.WARNING)
    logging.getLogger("noveld").setLevel(logging.WARNING if quiet else logging.INFO)
