"""One writer at a time for ``svi``: its natural-gradient step decays the whole model
and is computed against the writer's view of it, so steps of two replicas do not commute. The
namespace's writer lease in Redis names the one replica that steps the model; the others wait
as hot standbys (unready) and take over when it stops renewing the lease — a graceful stop
gives it up at once, a crash after ``redis.writer_lease_ms``. Every commit checks the lease
atomically (commit.lua), so a writer that lapsed (paused, cut off) cannot step the model after
its successor started."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from noveld.daemon.outage import is_outage, outage_reason
from noveld.state.redis.store import RedisStore

log = logging.getLogger("noveld.lease")


class WriterLease:
    """The namespace's writer lease, held by this process while it runs: taken (or waited for),
    renewed by a background thread every third of its term, given up at the end."""

    def __init__(self, store: RedisStore, lease_ms: int) -> None:
        self.store = store
        self.lease_ms = lease_ms
        store.lease_ms = lease_ms  # commits check and renew it from now on
        self.lost_to: str | None = None  # the writer that took it over, once that happened
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def try_take(self) -> str | None:
        """Take the lease if nobody else holds it: None when taken, else the holder's id."""
        return self.store.take_lease()

    def wait(
        self,
        stop: threading.Event,
        say: Callable[[str], None],
        unready: Callable[[str], None],
        turn: Callable[[], None],
    ) -> bool:
        """Stand by until the lease is free and taken (True), or until ``stop`` (False). Redis
        outages meanwhile are waited out too."""
        announced = None
        poll_s = min(1.0, self.lease_ms / 3000)
        while not stop.is_set():
            turn()
            try:
                holder = self.try_take()
            except Exception as exc:
                if not is_outage(exc):
                    raise
                unready(f"standby: {outage_reason(exc)}")
                stop.wait(poll_s)
                continue
            if holder is None:
                if announced is not None:
                    say("took over the svi writer lease")
                return True
            if holder != announced:
                reason = (
                    f"standby: writer {holder} holds the svi writer lease of namespace "
                    f"{self.store.namespace!r} (one writer at a time: svi's global step does not "
                    "commute)"
                )
                say(
                    f"{reason}; taking over when it stops renewing the lease (within "
                    f"{self.lease_ms / 1000:g} s of a crash, at once after a graceful stop)"
                )
                unready(reason)
                announced = holder
            stop.wait(poll_s)
        return False

    def hold(self) -> bool:
        """Keep the lease just taken renewed in the background, every third of its term, until
        :meth:`release` (the loop looks at :attr:`lost_to` between batches); whether the state
        moved since this process loaded it (another writer stepped it: reload)."""
        self._thread = threading.Thread(target=self._renew, name="noveld-lease", daemon=True)
        self._thread.start()
        return self.store.behind()

    def _renew(self) -> None:
        while not self._stop.wait(self.lease_ms / 3000):
            try:
                holder = self.try_take()
            except Exception as exc:  # an outage: the commits meet it and ride it out
                log.debug("lease renewal failed: %r", exc)
                continue
            if holder is not None:
                self.lost_to = holder
                return

    def confirm(self) -> bool:
        """Renew the lease now (after a refused commit): whether this process still holds it."""
        holder = self.try_take()
        if holder is not None:
            self.lost_to = holder
        return self.lost_to is None

    def lost_message(self) -> str:
        """What an operator reads when another writer took the lease over."""
        return (
            f"writer {self.lost_to} took over the svi writer lease of namespace "
            f"{self.store.namespace!r} (this process could not renew it for "
            f"{self.lease_ms / 1000:g} s: paused, or cut off from Redis); stopping so that one "
            "writer steps the model — restarted, this replica waits as the standby"
        )

    def release(self) -> None:
        """Stop renewing and give the lease up (unless another writer holds it by now)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self.store.drop_lease()
        except Exception as exc:  # Redis away at shutdown: the lease expires by itself
            if not is_outage(exc):
                raise
            log.warning("could not give the svi writer lease up (%s); it expires by itself",
                        outage_reason(exc))  # fmt: skip
