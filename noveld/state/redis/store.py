"""The Redis state store: one class made of the parts in this package, each owning one
responsibility of a namespace's durable state (see :mod:`noveld.state.redis.keys` for the layout).

A commit costs O(partitions + events) in Redis whatever the batch size: the delta travels as one
string. Loading reads the checkpoint and replays the log after it. Writers take cluster uids from
a slot (the lowest input partition of the batch, whose epoch they hold), so replicas sharing a
namespace never hand out the same uid; each replica applies the others' deltas after its own
commits (statistics are additive).
"""

from __future__ import annotations

from noveld.state.redis.commit import Commit
from noveld.state.redis.lease import Claims
from noveld.state.redis.outbox import Outbox
from noveld.state.redis.server import Server
from noveld.state.redis.transfer import Transfer


class RedisStore(Commit, Transfer, Claims, Outbox, Server):
    """A namespace's durable state in Redis (a server or a cluster); every batch is one atomic
    Lua commit. Its parts: :class:`Commit` (with the vocabulary and the reader beneath it),
    :class:`Transfer` (export, import), :class:`Claims` (fencing, offsets, the writer lease),
    :class:`Outbox` and :class:`Server` (health, durability, replication)."""

    @property
    def wants_batch_state(self) -> bool:
        """Each commit carries the novelty state."""
        return True
