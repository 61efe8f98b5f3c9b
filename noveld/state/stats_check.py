"""Checks of a statistics arrays set read from outside the process (a snapshot file, a Redis
checkpoint) and of a batch delta (a Redis log entry), before the numba kernels — which index
without bounds checks — or the model's arithmetic see them.

A damaged or foreign-but-well-formed state must fail with a message naming the field, not
crash the process (a segfault), loop in a kernel, or count wrong.
"""

from __future__ import annotations

from typing import NoReturn

import numpy as np

from noveld.models.base import StatsDelta
from noveld.models.kernels import multinomial as kern
from noveld.state.redis.keys import UID_SLOT_BITS as _UID_SLOT_BITS

_INT64_MAX = np.iinfo(np.int64).max
#: the statistics arrays by the dtype kinds they may have ('b' bool, 'i'/'u' integers, 'f' float)
_STATS_KINDS = {
    "m": "iuf",
    "ntok": "iuf",
    "alive": "b",
    "uid": "iu",
    "free_stack": "iu",
    "head": "iu",
    "nxt": "iu",
    "pk": "iu",
    "pc": "iuf",
    "ictl": "iu",
    "scale": "iuf",
}
#: the ``ictl`` fields (kernels.multinomial) by position; snapshots from before DOCS_SEEN have 4
_ICTL_NAMES = {
    kern.POOL_USED: "pool_used",
    kern.KMAX: "kmax",
    kern.NFREE: "nfree",
    kern.NEXT_UID: "next_uid",
    kern.DOCS_SEEN: "docs_seen",
    kern.STEPS: "steps",
}
_ICTL_MIN = kern.NEXT_UID + 1
#: what a rounding error may leave below zero in a mass or count (relative to the largest)
_ROUNDING = 1e-9


def _outside(x: np.ndarray, lo: int, hi: int) -> int:
    """The first index of ``x`` whose value is not in ``[lo, hi)``, or -1 (two reductions when
    every value is: the usual case)."""
    if not x.shape[0] or (int(x.min()) >= lo and int(x.max()) < hi):
        return -1
    return int(np.argmax((x < lo) | (x >= hi)))


class StatsCheck:
    """The checks of one statistics arrays set; :meth:`fail` says where the arrays came from."""

    def fail(self, field: str, what: str) -> NoReturn:
        """Raise the caller's error for ``field`` (e.g. ``stats.nxt``) and what is wrong."""
        raise NotImplementedError

    def stats(
        self, raw: dict[str, np.ndarray], n_words: int, uidnext: dict[str, int]
    ) -> dict[str, np.ndarray]:
        """The statistics arrays, checked and converted to the dtypes ``from_arrays`` makes of
        them: what the kernels rely on (lengths, pointers and slots in range, acyclic postings
        lists) and what the model's arithmetic does (finite, non-negative masses and counts)."""
        a = {name: self.array(name, raw.get(name), kinds) for name, kinds in _STATS_KINDS.items()}
        ictl = a["ictl"]
        if ictl.shape[0] < _ICTL_MIN:
            self.fail("stats.ictl", f"has {ictl.shape[0]} fields, fewer than {_ICTL_MIN}")
        for i, name in _ICTL_NAMES.items():
            if i < ictl.shape[0] and ictl[i] < 0:
                self.fail(f"stats.ictl ({name})", f"is negative: {int(ictl[i])}")
        used, kmax, nfree = (int(ictl[i]) for i in (kern.POOL_USED, kern.KMAX, kern.NFREE))
        for name in ("m", "ntok", "alive", "uid"):
            if a[name].shape[0] != kmax:
                self.fail(
                    f"stats.{name}",
                    f"has {a[name].shape[0]} entries but stats.ictl (kmax) says {kmax} slots",
                )
        if a["free_stack"].shape[0] != nfree:
            self.fail(
                "stats.free_stack",
                f"has {a['free_stack'].shape[0]} entries but stats.ictl (nfree) says {nfree}",
            )
        pool = a["pk"].shape[0]
        for name in ("nxt", "pc"):
            if a[name].shape[0] != pool:
                self.fail(f"stats.{name}", f"has {a[name].shape[0]} entries, stats.pk {pool}")
        if used > pool:
            self.fail("stats.ictl (pool_used)", f"is {used} but the pool holds {pool} entries")
        if a["scale"].shape[0] != 1 or not (np.isfinite(a["scale"][0]) and a["scale"][0] > 0):
            self.fail("stats.scale", f"is not one finite positive number: {a['scale'][:3]}")
        self.masses("stats.m", a["m"], "slot")
        self.masses("stats.ntok", a["ntok"], "slot")
        self.masses("stats.pc", a["pc"][:used], "entry")
        alive, uid = a["alive"], a["uid"]
        self.free_stack(a["free_stack"], alive)
        self.postings(a["head"], a["nxt"][:used], a["pk"][:used], kmax, used)
        words = np.flatnonzero(a["head"] >= 0)
        if words.shape[0] and int(words[-1]) >= n_words:
            self.fail(
                "stats.head", f"counts word {int(words[-1])}, beyond the vocab's {n_words} words"
            )
        self.uids(uid[alive], np.flatnonzero(alive), uidnext)
        since = "young_step" if "young_step" in raw else "young_since"  # log steps / documents
        if "young_uid" in raw or since in raw:  # merge candidates (newer snapshots)
            for name in ("young_uid", since):
                a[name] = self.array(name, raw.get(name), "iu")
            if a["young_uid"].shape[0] != a[since].shape[0]:
                self.fail(f"stats.{since}", "does not match stats.young_uid in length")
        return a

    def array(self, name: str, x: np.ndarray | None, kinds: str) -> np.ndarray:
        field = f"stats.{name}"
        if x is None:
            self.fail(field, "is missing")
        if x.dtype.kind not in kinds:
            self.fail(field, f"has dtype {x.dtype}, not {'bool' if kinds == 'b' else 'numeric'}")
        if x.ndim != 1:
            self.fail(field, f"is not one-dimensional (shape {x.shape})")
        if kinds == "b":
            return x
        if kinds == "iu":
            if x.dtype.kind == "u" and x.shape[0] and int(x.max()) > _INT64_MAX:
                self.fail(field, f"holds {int(x.max())}, beyond int64")
            return x.astype(np.int64, copy=False)
        return x.astype(np.float64, copy=False)

    def masses(self, field: str, x: np.ndarray, what: str) -> None:
        """Finite and ≥ 0 (up to rounding: removals leave sums within an ulp of zero)."""
        if not x.shape[0]:
            return
        lo, hi = float(x.min()), float(x.max())  # NaN and infinities show in one of the two
        if not (np.isfinite(lo) and np.isfinite(hi)):
            i = int(np.argmax(~np.isfinite(x)))
            self.fail(field, f"holds {x[i]} ({what} {i}), not a finite number")
        if lo < -_ROUNDING * max(1.0, hi):
            i = int(np.argmin(x))
            self.fail(field, f"holds the negative value {x[i]} ({what} {i})")

    def free_stack(self, free: np.ndarray, alive: np.ndarray) -> None:
        kmax = alive.shape[0]
        i = _outside(free, 0, kmax)
        if i >= 0:
            self.fail("stats.free_stack", f"names slot {free[i]}, outside the {kmax} slots")
        if np.unique(free).shape[0] != free.shape[0]:
            self.fail("stats.free_stack", "names a slot twice")
        live = alive[free]
        if live.any():
            self.fail("stats.free_stack", f"names slot {free[int(np.argmax(live))]}, a live one")

    def postings(
        self, head: np.ndarray, nxt: np.ndarray, pk: np.ndarray, kmax: int, used: int
    ) -> None:
        """Every list starts and continues inside the pool and names slots < kmax; every entry
        of the pool is linked from exactly one place (a head or another entry): none from two
        (overlapping lists, which compaction would copy past the end of its buffers, or a
        loop into a list: an endless walk), none left out (counts lost); and no cycle."""
        w = _outside(head, -1, used)
        if w >= 0:
            self.fail(
                "stats.head",
                f"points outside the pool (word {w} → {head[w]}; the pool holds {used} entries)",
            )
        e = _outside(pk, 0, kmax)
        if e >= 0:
            self.fail("stats.pk", f"names slot {pk[e]} (entry {e}), outside the {kmax} slots")
        if self.compacted_layout(head, nxt, used):
            return
        e = _outside(nxt, -1, used)
        if e >= 0:
            self.fail(
                "stats.nxt",
                f"points outside the pool (entry {e} → {nxt[e]}; the pool holds {used} entries)",
            )
        # `used` links reaching every entry reach each once (a bincount only to name one)
        targets = (head[head >= 0], nxt[nxt >= 0])
        reached = np.zeros(used, dtype=np.bool_)
        for t in targets:
            reached[t] = True
        if targets[0].shape[0] + targets[1].shape[0] != used or not reached.all():
            links = np.bincount(np.concatenate(targets), minlength=used)
            if int(links.max()) > 1:
                e = int(np.argmax(links > 1))
                self.fail("stats.nxt", f"links entry {e} from two places (postings lists overlap)")
            e = int(np.argmax(links < 1))  # a snapshot's pool is compacted: no entry is unused
            self.fail("stats.head", f"leaves entry {e} out of every postings list")
        if bool(np.all((nxt < 0) | (nxt > np.arange(used)))):  # lists run forward: acyclic
            return
        jump = nxt.copy()
        todo = np.flatnonzero(jump >= 0)
        for _ in range(max(used, 1).bit_length() + 1):
            if not todo.shape[0]:
                return
            jump[todo] = jump[jump[todo]]
            todo = todo[jump[todo] >= 0]
        if todo.shape[0]:
            self.fail("stats.nxt", f"has a cycle (through entry {int(todo[0])})")

    @staticmethod
    def compacted_layout(head: np.ndarray, nxt: np.ndarray, used: int) -> bool:
        """Whether the pool is laid out as compaction (so every snapshot) leaves it, which
        passes the checks of :meth:`postings` at a glance (``head`` already checked to point
        inside the pool): each word's entries consecutive (``nxt[e]`` is ``e + 1`` or ``-1``,
        the last entry ``-1``), the lists in the order of their words, one after the other
        from entry 0 with no gap."""
        if not used or nxt[used - 1] != -1:
            return False
        ends = nxt == -1
        if not bool(np.all((nxt == np.arange(1, used + 1)) | ends)):
            return False
        firsts = head[head >= 0]
        later = np.flatnonzero(ends[:-1]) + 1  # where the second, third... list starts
        return (
            firsts.shape[0] == later.shape[0] + 1
            and int(firsts[0]) == 0
            and bool(np.array_equal(firsts[1:], later))
        )

    def uids(self, uids: np.ndarray, slots: np.ndarray, uidnext: dict[str, int]) -> None:
        """Live clusters have distinct uids ≥ 0, below their slot's next counter (where the
        header names one): a counter at or below one of them would hand its uid out again."""
        if uids.shape[0] and int(uids.min()) < 0:
            i = int(np.argmin(uids))
            self.fail("stats.uid", f"gives the live slot {slots[i]} the negative uid {uids[i]}")
        distinct, counts = np.unique(uids, return_counts=True)
        if distinct.shape[0] != uids.shape[0]:
            self.fail("stats.uid", f"gives uid {distinct[int(np.argmax(counts))]} to two clusters")
        slot_of, counter = uids >> _UID_SLOT_BITS, uids & ((1 << _UID_SLOT_BITS) - 1)
        for key, nxt in uidnext.items():
            mine = counter[slot_of == int(key)]
            if mine.shape[0] and int(mine.max()) >= nxt:
                self.fail(
                    f"uidnext[{key!r}]",
                    f"is {nxt} but a live cluster of that slot has counter {int(mine.max())}",
                )


def delta_problem(delta: StatsDelta, n_words: int | None) -> tuple[str, str] | None:
    """Where and how a decoded batch delta cannot be applied to statistics over ``n_words``
    words — ``("word_ids", "holds word 9000, not a word id of 800")`` — or None (with
    ``n_words`` None, the vocabulary is not known yet: word ids are only checked ≥ 0). What
    :func:`noveld.models.dpmm.replay_delta` relies on: a decay in [0, 1], finite changes,
    pairs that name one of the delta's clusters and a vocabulary word, uids ≥ 0. (A decay of 0
    is svi's first step with τ₀ = 0, ρ = 1: everything before it forgotten.)"""
    if not (np.isfinite(delta.decay) and 0.0 <= delta.decay <= 1.0):  # svi's first step: 0
        return "decay", f"is {delta.decay}, not in [0, 1]"
    nc = delta.cluster_uids.shape[0]
    if np.unique(delta.cluster_uids).shape[0] != nc:
        return "cluster_uids", "names a cluster twice"
    for name in ("cluster_uids", "born_uids", "retired_uids", "merges"):
        uids = getattr(delta, name)
        if uids.size and int(uids.min()) < 0:
            return name, f"holds the negative uid {int(uids.min())}"
    for name in ("dm", "dntok", "word_count"):
        x = getattr(delta, name)
        if x.size and not bool(np.isfinite(x).all()):
            return name, "holds a value that is not a finite number"
    e = _outside(delta.word_cluster, 0, nc)
    if e >= 0:
        return "word_cluster", f"names cluster {delta.word_cluster[e]} of {nc} (pair {e})"
    e = _outside(delta.word_ids, 0, (1 << 62) if n_words is None else n_words)
    if e >= 0:
        return "word_ids", f"holds word {delta.word_ids[e]}, not a word id of {n_words or 'any'}"
    if delta.n_docs < -1:
        return "n_docs", f"is {delta.n_docs}"
    return None
