"""Scale-out in one process: N model replicas over a 4-partition split of a labelled stream,
each seating its own batches and taking in the others' deltas when it commits, in commit order
(as the Redis commit does), without Kafka or Redis — seconds instead of bench_scaleout's
minutes — to find where N replicas lose quality against one.

    python benchmarks/sim_scaleout.py [--data FILE] [--replicas 1 4] [--batch-size 256]
                                      [--rate 1000] [--step-ms 50] [--doc-ms 5]
                                      [--max-wait-ms 0]
                                      [--whole-batches] [--lag-free | --no-refresh]
                                      [--reseat [--reseat-cost F]]
                                      [--own-docs-only] [--young-steps N]

Documents are keyed by line number onto 4 partitions (Kafka's murmur2 partitioner, as
``bench_scaleout`` produces them); replica r of N holds partitions r, r+N, ... A replica polls
once its previous batch committed: what has arrived by then (at least one document) up to its
share of ``--batch-size`` (``batch.share``; ``--whole-batches``: all of it), produced at
``--rate`` (``--max-wait-ms``: waits for a full batch, that long at most after its first
document; the daemon's Kafka poll does not wait so), and commits ``--step-ms`` +
``--doc-ms`` per document later. Before it seats a batch a replica applies the others'
commits that landed by its poll (``batch.refresh``, the pre-seat refresh); ``--no-refresh``:
only at its own commit. ``--lag-free``: every replica
applies every earlier commit before it seats a batch, also those landing while it steps.
``--reseat`` (a what-if): a replica whose peers committed while it stepped takes their commits
in and seats the batch again before committing it, the second seating taking
``--reseat-cost`` of a step (1: the whole step again).
Each replica's novelty tracker is fed as the daemon feeds it
(:func:`noveld.daemon.stages.novelty.observe`, and the documents the applied deltas seated,
as the Redis commit and refresh count them); ``--own-docs-only``: only the
documents a replica seats count towards its candidates.

Scored like ``bench_scaleout``: each document's emitted cluster with every merge applied; the
announcements one per final cluster. The diagnosis sorts the documents outside their story's
main cluster by cause (:func:`diagnose`) and gives the NMI with the merges that joined two
stories undone and with every story's duplicate clusters merged.
"""

from __future__ import annotations

import argparse
import bisect
import heapq
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_data_option, load_texts, machine

from noveld.connectors.kafka_source import batch_share
from noveld.daemon.model_kinds import dense_dimension
from noveld.daemon.model_registry import make_model, variant_of
from noveld.daemon.settings import Settings
from noveld.daemon.stages.featurize import text_encoder
from noveld.daemon.stages.novelty import observe
from noveld.eval.metrics import clustering_scores
from noveld.eval.novelty import novelty_scores
from noveld.featurize import Featurizer, Tokenizer
from noveld.models.dpmm import replay_delta
from noveld.models.kernels import multinomial as kern
from noveld.models.lineage import UID_SLOT_BITS
from noveld.models.novelty import NoveltyTracker, seated_by_cluster
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument, SourcePosition

PARTITIONS = 4
#: clusters announced in the namespace (the commit script announces each once)
ANNOUNCED: set[int] = set()


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (the Java client's, which kafka-python's partitioner copies)."""
    length, seed, m, r = len(data), 0x9747B28C, 0x5BD1E995, 24
    h = (seed ^ length) & 0xFFFFFFFF
    for i in range(0, length - length % 4, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length % 4
    tail = data[length - rest :]
    if rest >= 3:
        h ^= tail[2] << 16
    if rest >= 2:
        h ^= tail[1] << 8
    if rest >= 1:
        h ^= tail[0]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def partition_of(i: int) -> int:
    """The partition Kafka's default partitioner gives key ``str(i)``."""
    return (murmur2(str(i).encode()) & 0x7FFFFFFF) % PARTITIONS


class Replica:
    """One writer: its model, statistics, partitions and how far it has read the log."""

    def __init__(self, settings: Settings, vocab: Vocabulary, parts: list[int]) -> None:
        self.model = make_model(settings)

        def reserve(wanted: list[str]) -> list[int]:
            vocab.extend([w for w in wanted if w not in vocab])
            return [int(i) for w in wanted if (i := vocab.get(w)) is not None]

        variant_of(settings.model).bind_reserved(self.model, vocab.to_list, reserve)
        self.stats = self.model.new_state()
        self.parts = parts
        self.slot = min(parts)
        self.uid_next = 0
        self.last_seq = 0
        self.stats.lineage.own_slots = frozenset(parts)
        nov = settings.novelty
        self.tracker = NoveltyTracker(nov.min_size, nov.confirm_within, hold_docs=nov.hold_docs)
        self.state = SimpleNamespace(stats=self.stats)  # what the novelty stage reads of it

    @property
    def live(self) -> Any:
        """The parts of a :class:`~noveld.daemon.stages.live.LiveNamespace` the novelty
        stage uses (``announced``: the namespace's, as the commit script keeps it)."""
        return SimpleNamespace(state=self.state, tracker=self.tracker, announced=ANNOUNCED)


def run(rows: list[dict[str, Any]], n: int, a: argparse.Namespace) -> dict[str, Any]:
    """Seat the stream on ``n`` replicas; the emitted clusters, merges and births."""
    settings = Settings()
    m = settings.model
    vocab = Vocabulary()
    feat = Featurizer(
        Tokenizer(), vocab, embedding_dim=dense_dimension(m), encoder=text_encoder(m),
        words_view=True,
    )  # fmt: skip
    parts_of = [[p for p in range(PARTITIONS) if p % n == r] for r in range(n)]
    replicas = [Replica(settings, vocab, ps) for ps in parts_of]
    ANNOUNCED.clear()
    variant = variant_of(m)
    for rep in replicas:
        if a.young_steps is not None:
            rep.model.config = replace(rep.model.config, young_steps=a.young_steps)
    part = [partition_of(i) for i in range(len(rows))]
    mine = [[i for i in range(len(rows)) if part[i] in ps] for ps in parts_of]
    read = [0] * n  # how many of its documents each replica has read
    cap = [a.batch_size if a.whole_batches else batch_share(a.batch_size, len(ps), PARTITIONS)
           for ps in parts_of]  # fmt: skip

    def next_batch(r: int, free: float) -> tuple[float, int, list[int], float]:
        """Replica r's next poll once it is free at ``free``: what has arrived (at least one
        document: the poll waits for it), up to a batch; with its commit time and the poll's.
        With ``--max-wait-ms`` the poll waits for a full batch, at most that long after its
        first document arrived (``batch.max_wait_ms``)."""
        docs = mine[r]
        start = max(free, (docs[read[r]] + 1) / a.rate)
        if a.max_wait_ms > 0:
            full = docs[min(read[r] + cap[r], len(docs)) - 1]
            start = max(free, min((full + 1) / a.rate, start + a.max_wait_ms / 1e3))
        end = read[r] + 1
        while end < len(docs) and end - read[r] < cap[r] and (docs[end] + 1) / a.rate <= start:
            end += 1
        idx = docs[read[r] : end]
        read[r] = end
        return start + (a.step_ms + a.doc_ms * len(idx)) / 1e3, r, idx, start

    heap = [(*next_batch(r, 0.0), False) for r in range(n) if mine[r]]
    heapq.heapify(heap)
    log: list[tuple[int, Any, list[int]]] = []
    landed: list[float] = []  # each log entry's commit time, ascending
    offsets = [0] * PARTITIONS
    emitted = np.full(len(rows), -1, dtype=np.int64)
    into: dict[int, int] = {}
    born: list[tuple[int, int]] = []  # (uid, founding doc)
    announced: list[tuple[int, int, int]] = []  # (uid, founding doc, confirming doc)
    sizes: list[int] = []
    while heap:
        t, r, idx, polled, again = heapq.heappop(heap)
        if a.reseat and not again and not a.lag_free:
            since = bisect.bisect_right(landed, polled)
            if any(w != r for w, _, _ in log[since:]):  # others committed while it stepped
                step = (a.step_ms + a.doc_ms * len(idx)) / 1e3
                heapq.heappush(heap, (t + step * a.reseat_cost, r, idx, t, True))
                continue
        if read[r] < len(mine[r]):
            heapq.heappush(heap, (*next_batch(r, t), False))
        sizes.append(len(idx))
        rep = replicas[r]
        if a.lag_free:
            catch_up(rep, log, r, not a.own_docs_only)
        elif not a.no_refresh:  # the commits that landed by the poll
            catch_up(rep, log, r, not a.own_docs_only, bisect.bisect_right(landed, polled))
        docs = [DecodedDocument(id=str(i), text=str(rows[i]["text"])) for i in idx]
        batch, empty = feat.featurize(docs)
        keep = [i for j, i in enumerate(idx) if j not in set(empty)]
        kept = [d for j, d in enumerate(docs) if j not in set(empty)]
        first = {p: offsets[p] for p in rep.parts if any(part[i] == p for i in idx)}
        for i in idx:
            offsets[part[i]] += 1
        rep.stats.ictl[kern.NEXT_UID] = (min(first) << UID_SLOT_BITS) + rep.uid_next
        rng = np.random.default_rng([m.seed, *sorted(first.values())])
        first_index = int(rep.stats.ictl[kern.DOCS_SEEN])
        res = rep.model.partial_fit(batch, rep.stats, rng)
        at = [SourcePosition(topic="t", partition=part[i], offset=i) for i in keep]
        for c in observe(rep.live, variant, rep.model, batch, res, kept, at, first_index,
                         settings.novelty.refound):  # fmt: skip
            ANNOUNCED.add(c.candidate.uid)
            announced.append(
                (c.candidate.uid, int(c.candidate.founding_doc_id), c.confirmed_at["offset"])
            )
        rep.uid_next = int(rep.stats.ictl[kern.NEXT_UID]) & ((1 << UID_SLOT_BITS) - 1)
        emitted[keep] = res.assignments
        for src, dst, _ in res.merged:
            into[src] = dst
        born += [(u, keep[d]) for u, d, _ in res.born]
        log.append((r, res.delta, idx))
        landed.append(t)
        if not a.lag_free:
            catch_up(rep, log, r, not a.own_docs_only)
    return {"emitted": emitted, "into": into, "born": born, "announced": announced,
            "batch": float(np.median(sizes))}  # fmt: skip


def catch_up(
    rep: Replica, log: list[tuple[int, Any, list[int]]], r: int, count: bool, upto: int = -1
) -> None:
    """Apply the other replicas' entries this replica has not read (up to entry ``upto``, all
    by default), as the Redis commit and refresh do; with ``count`` the documents they seated
    count towards its candidates."""
    upto = len(log) if upto < 0 else max(upto, rep.last_seq)
    deltas = [d for writer, d, _ in log[rep.last_seq : upto] if writer != r]
    for d in deltas:
        replay_delta(rep.stats, d, rep.model.config.half_life_docs,
                     uncounted=rep.model.uncounted_words)  # fmt: skip
    if count:
        rep.tracker.count_foreign(
            seated_by_cluster(
                [(d.cluster_uids.tolist(), d.dm.tolist()) for d in deltas],
                rep.stats.lineage.resolve,
            )
        )
    rep.last_seq = upto


def final_of(into: dict[int, int]) -> Callable[[int], int]:
    """Where a cluster ended after the merges (what a consumer applying them sees)."""

    def final(c: int) -> int:
        for _ in range(1000):
            if c not in into:
                break
            c = into[c]
        return c

    return final


def majority(counts: dict[int, Counter[str]]) -> dict[int, str]:
    """Each cluster's commonest story."""
    return {c: cnt.most_common(1)[0][0] for c, cnt in counts.items() if cnt}


def tally(labels: list[str], clusters: list[int]) -> dict[int, Counter[str]]:
    """Stories per cluster."""
    out: dict[int, Counter[str]] = defaultdict(Counter)
    for lab, c in zip(labels, clusters, strict=True):
        out[c][lab] += 1
    return out


def diagnose(labels: list[str], out: dict[str, Any], horizon: int) -> dict[str, Any]:
    """NMI and where the documents outside their story's main cluster (the cluster holding
    most of it) are: in a duplicate cluster of their story (opened by the same writer or
    another one), or in a cluster of another story — put there by a merge that joined two
    stories, seated there while their story's main cluster lived on another writer (born
    within ``horizon`` documents before them) or otherwise; with the NMI those would give
    fixed (bad merges undone, duplicates merged)."""
    final = final_of(out["into"])
    emitted = [int(c) for c in out["emitted"]]
    pred = [final(c) for c in emitted]
    by_story: dict[str, Counter[int]] = defaultdict(Counter)
    for lab, c in zip(labels, pred, strict=True):
        by_story[lab][c] += 1
    main = {s: c.most_common(1)[0][0] for s, c in by_story.items()}
    owner, direct = majority(tally(labels, pred)), majority(tally(labels, emitted))
    founded = {final(u): d for u, d in reversed(out["born"])}  # cluster → its first founder
    bad = {
        (s, d) for s, d in out["into"].items()
        if s in direct and d in direct and direct[s] != direct[d]
    }  # fmt: skip
    why: Counter[str] = Counter()
    for i, (lab, c) in enumerate(zip(labels, pred, strict=True)):
        mc = main[lab]
        if c == mc:
            continue
        other = c >> UID_SLOT_BITS != mc >> UID_SLOT_BITS
        if owner[c] == lab:
            why["dup_other_writer" if other else "dup_same_writer"] += 1
        elif direct.get(emitted[i]) == lab:
            why["wrong_by_merge"] += 1
        elif (f := founded.get(mc)) is None or f >= i:
            why["wrong_before_story"] += 1
        elif other and i - f < horizon:
            why["wrong_story_elsewhere"] += 1
        else:
            why["wrong_other"] += 1
    good = final_of({s: d for s, d in out["into"].items() if (s, d) not in bad})
    dups_merged = [main[owner[c]] if owner[c] == lab else c
                   for lab, c in zip(labels, pred, strict=True)]  # fmt: skip
    return {
        "nmi": clustering_scores(labels, pred)["nmi"],
        "clusters": len(set(pred)),
        "births": len({final(u) for u, _ in out["born"]}),
        "merges": len(out["into"]),
        "bad_merges": len(bad),
        "why": why,
        "nmi_bad_undone": clustering_scores(labels, [good(c) for c in emitted])["nmi"],
        "nmi_dups_merged": clustering_scores(labels, dups_merged)["nmi"],
        "batch": out["batch"],
        **announcements(labels, out["announced"], final),
    }


def announcements(
    labels: list[str], announced: list[tuple[int, int, int]], final: Callable[[int], int]
) -> dict[str, float]:
    """Births confirmed by the replicas' novelty trackers, one per cluster after the merges
    (the earliest founding document), and their novelty precision / recall (W = 5)."""
    first: dict[int, tuple[int, int]] = {}
    for uid, founding, confirmed in announced:
        c = final(uid)
        at = (founding, max(founding, confirmed))
        first[c] = min(first.get(c, at), at)
    nov = novelty_scores(labels, list(first.values()))
    return {
        "announced": len(first),
        "precision": nov["novelty_precision"],
        "recall": nov["novelty_recall"],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_data_option(p)
    p.add_argument("--replicas", type=int, nargs="+", default=[1, 4])
    p.add_argument("--batch-size", type=int, default=256, help="the replicas' batch.max_docs")
    p.add_argument("--rate", type=float, default=1000, help="documents produced per second")
    p.add_argument("--step-ms", type=float, default=50, help="a step's fixed time until commit")
    p.add_argument("--doc-ms", type=float, default=5.0, help="a step's time per document")
    p.add_argument("--max-wait-ms", type=float, default=0,
                   help="a poll waits this long at most for a full batch")  # fmt: skip
    p.add_argument("--whole-batches", action="store_true",
                   help="each replica polls a whole batch, not its share of one")  # fmt: skip
    p.add_argument("--lag-free", action="store_true", help="apply all commits before seating")
    p.add_argument("--reseat", action="store_true",
                   help="seat a batch again, before committing it, when other replicas "
                   "committed while it stepped (a what-if: the daemon does not)")  # fmt: skip
    p.add_argument("--reseat-cost", type=float, default=1.0,
                   help="--reseat: the second seating's time as a fraction of a step")  # fmt: skip
    p.add_argument(
        "--no-refresh", action="store_true",
        help="take in the others' commits only at a replica's own commit (batch.refresh off)",
    )  # fmt: skip
    p.add_argument("--own-docs-only", action="store_true",
                   help="only its own documents count for a replica's candidates")  # fmt: skip
    p.add_argument("--young-steps", type=int, help="the models' young_steps (merge horizon)")
    a = p.parse_args()
    rows = load_texts(a.data)
    if any("label" not in r for r in rows):
        raise SystemExit(f"{a.data}: every document needs a label to score against")
    labels = [str(r["label"]) for r in rows]
    print(f"machine: {machine()}")
    print(
        f"data: {a.data} ({len(rows):,} docs), {PARTITIONS} partitions, batch {a.batch_size}"
        f"{' whole' if a.whole_batches else ' shared'} at {a.rate:,.0f} docs/s, step "
        f"{a.step_ms:g} ms + {a.doc_ms:g} ms/doc, max wait {a.max_wait_ms:g} ms, "
        f"{'lag-free' if a.lag_free else 'no refresh' if a.no_refresh else 'refresh at poll'}"
    )
    print(f"{'N':>2} {'NMI':>6} {'clusters':>8} {'births':>6} {'merges':>6} {'bad':>4} "
          f"{'batch':>5} {'bad undone':>10} {'dups merged':>11} {'announced':>9} {'nov P':>5} "
          f"{'nov R':>5}  "
          "off their story's main cluster")  # fmt: skip
    for n in a.replicas:
        d = diagnose(labels, run(rows, n, a), 2048)
        why = " ".join(f"{k} {v}" for k, v in sorted(d["why"].items()))
        print(
            f"{n:>2} {d['nmi']:6.4f} {d['clusters']:>8} {d['births']:>6} {d['merges']:>6} "
            f"{d['bad_merges']:>4} {d['batch']:>5.0f} {d['nmi_bad_undone']:>10.4f} "
            f"{d['nmi_dups_merged']:>11.4f} {d['announced']:>9} {d['precision']:5.3f} "
            f"{d['recall']:5.3f}  {why}",
            flush=True,
        )


if __name__ == "__main__":
    main()
