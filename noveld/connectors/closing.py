"""A connector used as a context manager: ``with`` closes it on the way out."""

from __future__ import annotations

from types import TracebackType
from typing import Self


class Closing:
    """``__enter__`` gives the object itself; ``__exit__`` calls its ``close()``."""

    def close(self) -> None:
        """Release what the connector holds."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
