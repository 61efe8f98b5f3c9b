"""Novelty decision: a birth is a candidate until it gathers ``min_size`` documents
within ``confirm_within`` documents of its birth; then it is confirmed (→ ``cluster.born``).
Documents are told apart by id: a document re-sent under the same id counts once. Replicas
sharing a namespace count each other's documents too (:meth:`NoveltyTracker.count_foreign`, from
the deltas they apply), and a candidate merged into another replica's cluster lives on as it.

With ``hold_docs`` (replicas sharing a namespace), a confirmed birth is *held* until the
namespace has counted ``hold_docs`` more documents — the other replicas' deltas of the same round
have been applied and merged — and is then announced under the cluster it lives on in
(``resolve``), or not at all once that cluster was retired: a story two replicas opened at once is
announced as one cluster, the merge's survivor.

Pure: it sees cluster uids, document indices and opaque position payloads, never I/O or clocks.
Its whole state is JSON-serialisable so it survives restarts with the model statistics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from noveld.models.base import FitTest


@dataclass
class Candidate:
    """A newly born cluster waiting for confirmation."""

    uid: int
    founding_doc_id: str
    born_at: dict[str, Any]
    born_index: int
    novelty_score: float
    size: int = 0
    exemplars: list[str] = field(default_factory=list)
    #: the first ``min_size`` members: doc id, position, stream index, word ids and counts
    members: list[dict[str, Any]] = field(default_factory=list)
    #: a held confirmation (``hold_docs``): where it was confirmed, and the namespace's document
    #: count from which it is announced; None / −1 while not confirmed
    confirmed_at: dict[str, Any] | None = None
    confirmed_index: int = -1
    release_at: int = -1


@dataclass(frozen=True)
class Confirmation:
    """A candidate that reached ``min_size``: everything a ``cluster.born`` event needs."""

    candidate: Candidate
    confirmed_at: dict[str, Any]
    confirmed_index: int


class NoveltyTracker:
    """Tracks candidates across batches; ``observe`` returns the confirmations of one batch."""

    def __init__(
        self,
        min_size: int = 3,
        confirm_within: int = 2000,
        max_exemplars: int = 5,
        hold_docs: int = 0,
    ):
        if hold_docs < 0:
            raise ValueError("novelty hold_docs must be >= 0")
        if min_size < 1:
            raise ValueError("novelty min_size must be >= 1")
        if confirm_within < 1:
            raise ValueError("novelty confirm_within must be >= 1")
        self.min_size = min_size
        self.confirm_within = confirm_within
        self.max_exemplars = max_exemplars
        self.hold_docs = hold_docs
        self.candidates: dict[int, Candidate] = {}
        self.dropped = 0

    def observe(
        self,
        births: Sequence[tuple[int, int, float]],
        assignments: Sequence[int],
        doc_ids: Sequence[str],
        positions: Sequence[dict[str, Any]],
        first_index: int,
        retired: Sequence[int] = (),
        features: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
        fits: FitTest | None = None,
        resolve: Callable[[int], int | None] | None = None,
        now: int | None = None,
        hold: bool = True,
        moved: Mapping[int, int] | None = None,
        held: Mapping[int, int] | None = None,
    ) -> list[Confirmation]:
        """Register births, count members in stream order, confirm or expire candidates.

        ``births`` are (uid, batch index of the founding document, novelty score); document
        ``i`` of the batch has stream index ``first_index + i`` and words ``features[i]``.

        With ``fits``, a confirmed candidate's founding document is its first member that still
        fits the cluster (see :meth:`_refound`), not necessarily the document that opened it.

        ``resolve`` (with ``hold_docs``): the live cluster a uid lives on in now (itself, or
        the survivor it was merged into), None once it is gone; ``now``: the namespace's
        document count after this batch and every other writer's applied so far (default: the
        batch's end). The held confirmations due (:meth:`_release`) come first in the list;
        ``hold`` False: this batch's confirmations are not held (no other writer is active).

        ``moved`` (replicas): candidates this step merged into another writer's cluster, source
        uid → survivor uid. Such a candidate lives on as the survivor (:meth:`_move`), where
        dropping it would lose the story when the survivor is no candidate of its writer.
        ``held`` (replicas): documents each candidate's cluster holds now, keyed by uid. A
        candidate counts at least those (:meth:`_count_held`): a twin another replica opened
        for the same story and merged into it brings its documents along.
        Candidates that reached ``min_size`` with other writers' documents
        (:meth:`count_foreign`) are confirmed at the batch's first document.
        """
        end = first_index + len(assignments)
        clock = end if now is None else now
        confirmed = self._release(clock, resolve or _unchanged, fits)
        if moved:
            self._move(moved)
        grown = [c for c in self.candidates.values() if c.release_at < 0]
        for grown_cand in grown:  # grown to min_size by other writers' documents
            if grown_cand.size >= self.min_size and positions:
                confirmed += self._confirm(grown_cand, positions[0], first_index, clock, fits, hold)
        for uid, d, score in births:
            self.candidates[uid] = Candidate(
                uid=uid,
                founding_doc_id=doc_ids[d],
                born_at=positions[d],
                born_index=first_index + d,
                novelty_score=score,
            )
        for i, uid in enumerate(assignments):
            cand = self.candidates.get(int(uid))
            if cand is None or cand.release_at >= 0 or first_index + i < cand.born_index:
                continue
            if first_index + i - cand.born_index >= self.confirm_within:
                continue
            if _repeats(cand, doc_ids[i]):  # a re-sent document is not more evidence
                continue
            cand.size += 1
            if len(cand.exemplars) < self.max_exemplars:
                cand.exemplars.append(doc_ids[i])
            if features is not None and len(cand.members) < self.min_size:
                w, c = features[i]
                cand.members.append(
                    {
                        "doc_id": doc_ids[i],
                        "at": positions[i],
                        "index": first_index + i,
                        "words": np.asarray(w, dtype=np.int64).tolist(),
                        "counts": np.asarray(c, dtype=np.int64).tolist(),
                    }
                )
            if cand.size >= self.min_size:
                confirmed += self._confirm(cand, positions[i], first_index + i, clock, fits, hold)
        if held:
            confirmed += self._count_held(held, positions, first_index, clock, fits, hold)
        gone = set(retired) - set(moved or ())
        for uid in list(self.candidates):
            cand = self.candidates[uid]
            if cand.release_at >= 0:
                continue  # held: released (or dropped) by _release
            if uid in gone or end - cand.born_index >= self.confirm_within:
                del self.candidates[uid]
                self.dropped += 1
        return confirmed

    def _confirm(
        self,
        cand: Candidate,
        at: dict[str, Any],
        index: int,
        clock: int,
        fits: FitTest | None,
        hold: bool,
    ) -> list[Confirmation]:
        """Confirm a candidate that reached ``min_size`` at document ``index`` (position
        ``at``): announced now, or held (``hold_docs``) and released by :meth:`_release`."""
        if fits is not None:
            self._refound(cand, fits)
        if self.hold_docs and hold:
            cand.confirmed_at, cand.confirmed_index = at, index
            cand.release_at = clock + self.hold_docs
            return []
        del self.candidates[cand.uid]
        return [Confirmation(cand, at, index)]

    def count_foreign(self, docs: Mapping[int, int]) -> None:
        """Count documents other writers seated (cluster uid, resolved to the cluster it lives
        on in here → documents, from their applied deltas) towards the candidates of those
        clusters; one that reaches ``min_size`` is confirmed by the next :meth:`observe`. Every
        replica applies the same deltas in log order, so this depends on the log alone."""
        for uid, n in docs.items():
            cand = self.candidates.get(uid)
            if cand is not None and cand.release_at < 0 and n > 0:
                cand.size += n

    def _count_held(
        self,
        held: Mapping[int, int],
        positions: Sequence[dict[str, Any]],
        first_index: int,
        clock: int,
        fits: FitTest | None,
        hold: bool,
    ) -> list[Confirmation]:
        """After a batch is counted: each open candidate counts at least the documents its
        cluster holds (``held``); one that reaches ``min_size`` so is confirmed at the batch's
        last document. Two replicas that opened one story at once each counted only their own
        twin's documents; the merge that joins the twins joins that evidence too."""
        out: list[Confirmation] = []
        for uid, n in held.items():
            cand = self.candidates.get(uid)
            if cand is None or cand.release_at >= 0 or n <= cand.size:
                continue
            cand.size = n
            if n >= self.min_size and positions:
                last = len(positions) - 1
                out += self._confirm(cand, positions[last], first_index + last, clock, fits, hold)
        return out

    def _move(self, moved: Mapping[int, int]) -> None:
        """Candidates merged into another writer's cluster live on as that survivor, their
        documents counted; two meeting in one survivor keep the earlier founding document."""
        for src, dst in moved.items():
            cand = self.candidates.get(src)
            if cand is None or cand.release_at >= 0:
                continue
            del self.candidates[src]
            other = self.candidates.get(dst)
            if other is not None and other.release_at >= 0:
                continue  # the survivor's own confirmation is held here already
            if other is not None:
                keep = min(cand, other, key=lambda c: (c.born_index, c.uid))
                keep.size = cand.size + other.size
                cand = keep
            cand.uid = dst
            self.candidates[dst] = cand

    def _release(
        self, now: int, resolve: Callable[[int], int | None], fits: FitTest | None
    ) -> list[Confirmation]:
        """The held confirmations due at namespace count ``now``, each under the cluster it
        lives on in (one per cluster: the earliest founding document), oldest first; those
        whose cluster is gone are dropped. With ``fits``, each is re-founded (:meth:`_refound`)
        in that cluster as it is now: a twin merged in meanwhile may have shown the founder
        to be a stray."""
        due = [c for c in self.candidates.values() if 0 <= c.release_at <= now]
        kept: list[Candidate] = []
        for cand in due:
            del self.candidates[cand.uid]
            survivor = resolve(cand.uid)
            if survivor is None:
                self.dropped += 1
                continue
            cand.uid = survivor
            if fits is not None:
                self._refound(cand, fits)
            kept.append(cand)
        out: dict[int, Confirmation] = {}
        for cand in sorted(kept, key=lambda c: (c.born_index, c.uid)):
            if cand.uid not in out:
                assert cand.confirmed_at is not None
                out[cand.uid] = Confirmation(cand, cand.confirmed_at, cand.confirmed_index)
        return list(out.values())

    @staticmethod
    def _refound(cand: Candidate, fits: FitTest) -> None:
        """Move the founding document to the first member that ``fits`` the cluster now.

        A document that opened a cluster alone and sat there until a later story's documents
        joined is a stray, not that story's first document; one collapsed Gibbs check per member
        (at confirmation, with the members' counts in the cluster) tells them apart. When no
        member fits, the founding document stays.
        """
        for mem in cand.members:
            words = np.asarray(mem["words"], dtype=np.int64)
            counts = np.asarray(mem["counts"], dtype=np.int64)
            if fits(cand.uid, words, counts):
                if mem["index"] != cand.born_index:
                    cand.founding_doc_id = str(mem["doc_id"])
                    cand.born_at = dict(mem["at"])
                    cand.born_index = int(mem["index"])
                return

    def to_json(self) -> dict[str, Any]:
        """Serialisable state (every commit to a shared store carries it: built without
        ``asdict``'s deep copy, since a member, once recorded, is never changed)."""
        return {
            "candidates": [_candidate_json(c) for c in self.candidates.values()],
            "dropped": self.dropped,
        }

    def load_json(self, data: dict[str, Any]) -> None:
        """Restore state written by :meth:`to_json`."""
        self.candidates = {int(c["uid"]): Candidate(**c) for c in data.get("candidates", [])}
        self.dropped = int(data.get("dropped", 0))


def _candidate_json(cand: Candidate) -> dict[str, Any]:
    """``asdict(cand)`` with its lists copied and the members' dicts shared (they are not
    changed after they are recorded); the held confirmation's fields only when it is held, so
    a state without held births reads as it did before they existed."""
    out = {
        "uid": cand.uid,
        "founding_doc_id": cand.founding_doc_id,
        "born_at": dict(cand.born_at),
        "born_index": cand.born_index,
        "novelty_score": cand.novelty_score,
        "size": cand.size,
        "exemplars": list(cand.exemplars),
        "members": list(cand.members),
    }
    if cand.release_at >= 0:
        out["confirmed_at"] = None if cand.confirmed_at is None else dict(cand.confirmed_at)
        out["confirmed_index"] = cand.confirmed_index
        out["release_at"] = cand.release_at
    return out


def seated_by_cluster(
    deltas: Sequence[tuple[Sequence[int], Sequence[float]]], resolve: Callable[[int], int]
) -> dict[int, int]:
    """Documents some batches seated per cluster, from their deltas' ``(cluster_uids, dm)``
    (:class:`~noveld.models.base.StatsDelta`), keyed by the cluster each uid lives on in once
    they are applied (``resolve``); a cluster a batch took documents from counts none there."""
    out: dict[int, int] = {}
    for uids, dm in deltas:
        for uid, d in zip(uids, dm, strict=True):
            n = round(float(d))
            if n > 0:
                key = resolve(int(uid))
                out[key] = out.get(key, 0) + n
    return out


def _unchanged(uid: int) -> int:
    """Every cluster lives on as itself (no model to ask)."""
    return uid


def _repeats(cand: Candidate, doc_id: str) -> bool:
    """Whether ``doc_id`` is already one of the candidate's members (or exemplars): the same
    article re-sent by its feed — an update, a producer's retry — must not confirm a story on
    its own. The members are the first ``min_size`` documents, so up to confirmation every
    earlier one is there to compare with."""
    return doc_id in cand.exemplars or any(m["doc_id"] == doc_id for m in cand.members)


def renumber_member_words(novelty: dict[str, Any], new_id: np.ndarray) -> dict[str, Any]:
    """A copy of a tracker's :meth:`NoveltyTracker.to_json` state with its candidates' member
    word ids renumbered by ``new_id`` (vocabulary compaction keeps every word they use)."""
    out = dict(novelty)
    out["candidates"] = [
        {
            **cand,
            "members": [
                {**mem, "words": [int(new_id[w]) for w in mem["words"]]}
                for mem in cand.get("members", [])
            ],
        }
        for cand in novelty.get("candidates", [])
    ]
    return out


def member_words(novelty: dict[str, Any]) -> list[int]:
    """Every word id the candidates' members use (the words compaction must keep)."""
    return [
        int(w)
        for cand in novelty.get("candidates", [])
        for mem in cand.get("members", [])
        for w in mem["words"]
    ]
