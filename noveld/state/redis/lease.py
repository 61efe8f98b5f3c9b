"""Who may write a namespace: fencing epochs per input partition (claims), the stored offsets an
operator may move, and the single writer's lease (svi), each changed by one atomic step."""

from __future__ import annotations

from noveld.state.redis.core import StoreCore
from noveld.state.redis.values import text

_SET_OFFSET = """
local old = redis.call('HGET', KEYS[1], ARGV[1])
if not old then return false end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return old
"""
_TAKE_LEASE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""
_DROP_LEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class Claims(StoreCore):
    """Claim partitions, move a stored offset, take and drop the writer lease."""

    def claim(self, partition_keys: list[str]) -> dict[str, int]:
        """Take ownership of partitions: bump their epochs; older owners are fenced from now."""
        pipe = self.client.pipeline(transaction=True)
        for key in partition_keys:
            pipe.hincrby(self.keys["epochs"], key, 1)
        for key, epoch in zip(partition_keys, pipe.execute(), strict=True):
            self.epochs[key] = int(epoch)
        self._slot = None  # ownership changed: re-read the uid slot counter
        return dict(self.epochs)

    def restore_claims(self) -> list[str]:
        """After Redis came back: claim again the partitions whose epoch the store lost, and
        return them. A store behind this writer's grant (a lower epoch) went through a failover
        that lost the claim; without a new one every commit would be refused as fenced. A
        higher epoch means another writer owns the partition now, which stays so."""
        owned = list(self.epochs)
        if not owned:
            return []
        stored = self.client.hmget(self.keys["epochs"], owned)
        lost = [
            k
            for k, v in zip(owned, stored, strict=True)
            if (0 if v is None else self._count("epochs", k, v)) < self.epochs[k]
        ]
        if lost:
            self.claim(lost)
        return lost

    def claim_keys(self, partition_keys: list[str]) -> None:
        """:meth:`claim` without the result (a rebalance callback)."""
        self.claim(partition_keys)

    def stored_offset(self, partition_key: str) -> int:
        """Next offset of a partition as committed with the state (0 if never seen)."""
        raw = self.client.hget(self.keys["offsets"], partition_key)
        return 0 if raw is None else self._count("offsets", partition_key, raw)

    def partitions(self) -> list[str]:
        """The partitions the namespace stores an offset for, sorted."""
        return sorted(text(p) for p in self.client.hkeys(self.keys["offsets"]))

    def set_offset(self, partition_key: str, offset: int) -> int | None:
        """Replace a partition's stored next offset (an operator's decision for a held
        partition); returns the one it replaces, or None — nothing written — when the namespace
        has no offset for that partition. One atomic script: a commit cannot slip between the
        check and the write."""
        old = self.client.eval(_SET_OFFSET, 1, self.keys["offsets"], partition_key, offset)
        return None if old is None else int(old)

    # ---- the single writer's lease (svi) --------------------------------------------------
    def take_lease(self) -> str | None:
        """Take (or renew) the namespace's writer lease for ``lease_ms``: None when this writer
        holds it now, else the id of the writer that does."""
        holder = self.client.eval(_TAKE_LEASE, 1, self.keys["lease"], self.writer, self.lease_ms)
        return None if holder is None else text(holder)

    def behind(self) -> bool:
        """Whether the namespace's log holds entries this writer has not taken in (another
        writer committed since this one loaded or last committed)."""
        raw = self.client.hget(self.keys["meta"], "seq")
        return (0 if raw is None else self._count("meta", "seq", raw)) > self.last_seq

    def drop_lease(self) -> None:
        """Give the lease up (a graceful stop), so a standby takes over at once; another
        writer's lease is left alone."""
        self.client.eval(_DROP_LEASE, 1, self.keys["lease"], self.writer)

    def release(self, partition_keys: list[str]) -> None:
        """Forget partitions this writer no longer owns (it can no longer commit them)."""
        for key in partition_keys:
            self.epochs.pop(key, None)
        self._slot = None
