"""Cross-replica reconciliation state of a cluster pool: the young clusters that may still merge
with another replica's birth of the same story, and where merged-away clusters went.

Replicas seat their own partitions concurrently and exchange batch deltas through a shared log,
so two replicas can each open a cluster for one story. Each keeps its own recent births, and the
births it takes in from other replicas, *young* for the namespace's next few dozen log steps
(batches of any writer); the merge step tests the young clusters against each other. Merges between
clusters of different writers keep the lower uid, so two replicas deciding the same merge make
the same move; a merge replayed after one of its clusters was merged away follows
:meth:`Lineage.resolve` to the survivor, so chains end in the same cluster on every replica.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MERGE_MEMORY_STEPS = 4096
"""How many log steps (batches of any writer) a merged-away uid is remembered: long enough for
every replica to have seen the merge before it adds to the uid again; bounded so memory is."""

MAX_YOUNG = 4096
"""Most young clusters kept (a model that never runs a merge step never ages them out)."""

_MAX_HOPS = 64


UID_SLOT_BITS = 40
"""A cluster uid is ``slot << UID_SLOT_BITS | counter``; the slot names the writer that opened
it (one input partition per slot, owned by one replica at a time)."""


@dataclass
class Lineage:
    """Young clusters (uid → the namespace's log step count at their birth) and the
    merged-into map (source uid → (survivor uid, log step of the merge)). The young clusters
    are stored with the statistics; the map is rebuilt by a restarted process from the log
    entries it replays."""

    young: dict[int, int] = field(default_factory=dict)
    merged_into: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: the uid slots of the input partitions this writer holds (set by a shared store before
    #: each batch); None: the slot of the batch's own uids
    own_slots: frozenset[int] | None = None

    def copy(self) -> Lineage:
        """An independent copy."""
        return Lineage(dict(self.young), dict(self.merged_into), self.own_slots)

    def resolve(self, uid: int) -> int:
        """The cluster ``uid`` lives on in: itself unless merged away (followed through chains,
        compressing the path)."""
        seen = [uid]
        while uid in self.merged_into and len(seen) <= _MAX_HOPS:
            uid = self.merged_into[uid][0]
            seen.append(uid)
        for u in seen[:-2]:
            self.merged_into[u] = (uid, self.merged_into[u][1])
        return uid

    def record(self, src: int, dst: int, step: int, memory: int = MERGE_MEMORY_STEPS) -> None:
        """``src`` was merged into ``dst`` at log step ``step``; forget merges older than
        ``memory`` steps (checked every 64 steps, so the map stays bounded)."""
        self.merged_into[src] = (dst, step)
        self.young.pop(src, None)
        if step % 64 == 0 or len(self.merged_into) > 4 * memory:
            old = [u for u, (_, s) in self.merged_into.items() if s < step - memory]
            for u in old:
                del self.merged_into[u]

    def add_young(self, uid: int, step: int) -> None:
        """``uid``, born when the namespace had applied ``step`` batches, is a merge candidate
        from now on (a birth keeps its first registration); at most :data:`MAX_YOUNG` are
        kept, the oldest dropped (models without a merge step)."""
        self.young.setdefault(uid, step)
        if len(self.young) > MAX_YOUNG:
            del self.young[next(iter(self.young))]

    def current(self, horizon: int, step: int) -> dict[int, int]:
        """The clusters born within the namespace's last ``horizon`` log steps (batches of any
        writer: replicas learn of each other's births a round of batches later, however many
        documents those hold); older ones are forgotten."""
        old = [u for u, since in self.young.items() if step - since >= horizon]
        for u in old:
            del self.young[u]
        return self.young
