"""The operator's messages of a run (``noveld: …`` lines on stderr), in one place: a run
without a progress stream (a library caller, a benchmark) says nothing."""

from __future__ import annotations

from typing import IO


class Reporter:
    """Writes the daemon's operator lines to ``out`` (None: says nothing)."""

    def __init__(self, out: IO[str] | None) -> None:
        self.out = out

    @property
    def silent(self) -> bool:
        """Whether lines go nowhere (callers skip composing them)."""
        return self.out is None

    def say(self, text: str) -> None:
        """One ``noveld: text`` line."""
        if self.out is not None:
            self.out.write(f"noveld: {text}\n")

    def error(self, text: str) -> None:
        """One ``noveld: error: text`` line."""
        self.say(f"error: {text}")

    def say_now(self, text: str) -> None:
        """One line, flushed at once (said from another thread, or before a long wait)."""
        if self.out is not None:
            self.out.write(f"noveld: {text}\n")
            self.out.flush()
