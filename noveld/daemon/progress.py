"""Progress lines on stderr during long work, and the end-of-run summary."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import IO

from noveld.daemon.pipeline import BatchReport


class Progress:
    """Accumulates batch reports; prints a line at most every ``interval_s`` seconds."""

    def __init__(
        self,
        stream: IO[str] | None,
        interval_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.interval_s = interval_s
        self._clock = clock
        self.started = clock()
        self._last = self.started
        self.docs = 0
        self.invalid = 0
        self.truncated = 0  # documents cut to limits.max_doc_tokens tokens
        self.births = 0
        self.retired = 0
        self.batches = 0
        self.replayed = 0
        self.clusters = 0
        self.reasons: Counter[str] = Counter()
        self.details: dict[str, str] = {}  # reason → the detail of its last invalid record
        self.stopped = False  # by SIGINT/SIGTERM before the input ran out
        #: how far into its input the run is (0 to 1), when that is known (a regular file)
        self.input_share: Callable[[], float | None] = lambda: None
        self._first_share = 0.0  # the share where the run began (a resume's is not 0)

    def follow(self, share: Callable[[], float | None]) -> None:
        """Show how far into its input the run is, by ``share`` (0 to 1, None: unknown), and
        from it an estimate of the time left."""
        self.input_share = share
        self._first_share = share() or 0.0

    def update(self, rep: BatchReport) -> None:
        """Fold in one batch; print if due."""
        self.docs += rep.valid
        self.invalid += rep.invalid
        self.truncated += rep.truncated
        self.births += rep.births
        self.retired += rep.retired
        self.batches += 1
        self.replayed += int(rep.replayed)
        self.clusters = rep.clusters_active
        self.reasons.update(rep.invalid_reasons)
        self.details.update(rep.invalid_details)
        now = self._clock()
        if self.stream is not None and now - self._last >= self.interval_s:
            self._last = now
            self.stream.write(f"noveld: {self.line()}\n")
            self.stream.flush()

    def dominant_reason(self) -> str:
        """The commonest reason records were invalid, with its count and the detail of its
        last record ("" if none was)."""
        if not self.reasons:
            return ""
        reason, n = self.reasons.most_common(1)[0]
        detail = self.details.get(reason, "")
        return f"most invalid records ({n:,} of {self.invalid:,}) are {reason}" + (
            f", the last one: {detail}" if detail else ""
        )

    @property
    def elapsed(self) -> float:
        """Seconds since start."""
        return max(self._clock() - self.started, 1e-9)

    def line(self) -> str:
        """One-line status: docs, rate, how far into the input (a file's), clusters, births,
        invalid."""
        rate = self.docs / self.elapsed
        return (
            f"{self.docs:,} docs ({rate:,.0f}/s){self._where()} · {self.clusters:,} active "
            f"clusters · {self.births:,} born · {self.invalid:,} invalid"
        )

    def _where(self) -> str:
        """`` · 42% of the input, ~1 min left`` while a file is being read, else ""."""
        share = self.input_share()
        if share is None or share >= 1.0:
            return ""
        done = share - self._first_share
        if done <= 0:
            return f" · {share:.0%} of the input"
        left = self.elapsed * (1.0 - share) / done
        when = "<1 s" if left < 1 else f"~{left:,.0f} s" if left < 120 else f"~{left / 60:,.0f} min"
        return f" · {share:.0%} of the input, {when} left"

    def summary(self, extra: str = "", code: int = 0) -> str:
        """Multi-line end-of-run summary (``code``: the run's exit code; not "done" if not 0)."""
        how = "stopped by signal" if self.stopped else "done" if code == 0 else f"stopped ({code})"
        lines = [f"noveld: {how} — {self.line()} in {self.elapsed:.1f}s"]
        if self.reasons:
            parts = ", ".join(f"{k}={v}" for k, v in sorted(self.reasons.items()))
            lines.append(f"noveld: invalid records by reason: {parts}")
        if self.truncated:
            lines.append(
                f"noveld: {self.truncated:,} documents longer than limits.max_doc_tokens were "
                "truncated to it (limits.oversize = truncate)"
            )
        if self.replayed:
            lines.append(f"noveld: {self.replayed} replayed batches skipped")
        if extra:
            lines.append(f"noveld: {extra}")
        return "\n".join(lines) + "\n"
