"""The event outbox in Redis: committed events wait in a stream until the sink has them; each
writer sends its own commits' events and takes over those another writer left behind."""

from __future__ import annotations

from typing import Any

from noveld.state.redis.core import StoreCore
from noveld.state.redis.values import text

ORPHANED_EVENTS_AFTER_S = 10.0
"""Age at which another writer's outbox entry is taken over: that writer died, or its broker
connection fails. Its own writer sends an entry right after the commit (milliseconds)."""


class Outbox(StoreCore):
    """Send and acknowledge the namespace's committed events."""

    def outbox_length(self) -> int:
        """Events not yet acknowledged (each parsed: an unreadable one is damage, named)."""
        entries = self.client.xrange(self.keys["outbox"], "-", "+")
        return sum(len(self._stored_events(sid, fields)) for sid, fields in entries)

    def outbox_pending(self) -> list[dict[str, Any]]:
        """Events in the outbox stream for this writer to send, oldest first, each with the
        JSON it was stored as (:class:`StoredEvent`): its own commits' events, and those of
        other writers still there :data:`ORPHANED_EVENTS_AFTER_S` after their commit (each
        replica sending every pending event sent many of them twice in normal operation). The
        first call takes every event: a restarted process sends what its predecessor left."""
        out: list[dict[str, Any]] = []
        self._entry_events.clear()
        now_ms: int | None = None
        own = self.writer.encode()
        for sid, fields in self.client.xrange(self.keys["outbox"], "-", "+"):
            writer = fields.get(b"w")
            if self._started and writer is not None and writer != own:  # another's: it sends
                if now_ms is None:
                    sec, usec = self.client.time()
                    now_ms = int(sec) * 1000 + int(usec) // 1000
                if now_ms - int(text(sid).split("-")[0]) < ORPHANED_EVENTS_AFTER_S * 1000:
                    continue  # unless they were left behind (a writer that died or cannot)
            events = self._stored_events(sid, fields)
            for ev in events:
                self._stream_ids[ev["event_id"]] = sid
            self._entry_events[sid] = {ev["event_id"] for ev in events}
            out += events
        self._started = True
        return out

    def ack(self, event_ids: list[str]) -> None:
        """Remove delivered events from the outbox: an entry goes once all of its events have
        been delivered."""
        done = []
        for e in event_ids:
            sid = self._stream_ids.pop(e, None)
            if sid is None:
                continue
            left = self._entry_events.get(sid)
            if left is not None:
                left.discard(e)
                if not left:
                    del self._entry_events[sid]
                    done.append(sid)
        if done:
            self.client.xdel(self.keys["outbox"], *done)
