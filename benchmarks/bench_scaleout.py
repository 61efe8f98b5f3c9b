"""Scale-out quality: N replicas of one model (``--model``, ``dpmm`` or ``hdp``) in one consumer
group and one Redis namespace.

    python benchmarks/bench_scaleout.py [--data FILE] [--model dpmm] [--replicas 1 2 4]
                                        [--batch-size 256] [--rate 1000] [--tail 2048]
                                        [--fetch-max-wait-ms 100] [--hold-docs N]
                                        [--whole-batches] [--save-events DIR] [--cost-rounds 4]

Starts a private tansu broker and Redis-protocol server (tests/servers/) and for each N runs N
``noveld run`` subprocesses (own group, namespace and topics per N); once every replica holds
partitions, produces the labelled stream in order, keyed by line number, to a 4-partition topic
at ``--rate`` documents per second (tansu holds a fetch for up to the consumer's
``--fetch-max-wait-ms`` even once records have arrived). When every document
is committed the replicas are stopped and the events topic is read back: the clusters come from
the ``documents.assigned`` events with each ``cluster.merged`` applied (what a consumer does),
the announcements from ``cluster.born``. Prints per N: NMI, clusters, births, *stories* (the
distinct true stories of the announcements' founding documents), stories announced by two or
more births (before and after the merges: announcements of clusters merged into
one count once, by their earliest founding document) and novelty precision / recall
(noveld.eval.novelty, window 5, over those merged announcements). After the stream come
``--tail`` unscored documents (its first ones again, under new ids), so that the births the
replicas hold before announcing them (``novelty.hold_docs``) are let out at its end too.

*batch*: the median documents of a ``documents.assigned`` event (a batch's documents of one
partition). *busy*: the median replica's share of the time in batches (its stages, from the
decode to the commit; the rest it waits for input), from the first 1,024 documents' production
to the last commit: how much of the time the replicas seat at once. *delay*: the median
milliseconds from a document's production to the sending of its assignment (after its
commit): for about as long, the other replicas seat blind to it. ``--whole-batches`` turns
``batch.share`` off (each replica reads whole batches, not its share of the partitions);
``--save-events DIR`` keeps each N's events as JSON.

``--cost-rounds R`` also times one replica's model step with reconciliation on and off
(``young_steps`` at its default vs 0), in alternation, R rounds each, and prints the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import redis
from kafka import KafkaConsumer, KafkaProducer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import add_data_option, load_texts, machine  # noqa: E402
from servers.kafka_broker import TEST_SESSION_TIMEOUT_MS, KafkaBroker  # noqa: E402
from servers.ports import free_port  # noqa: E402
from servers.redis_server import RedisServer  # noqa: E402

import noveld  # noqa: E402
from noveld.eval.metrics import clustering_scores  # noqa: E402
from noveld.eval.novelty import novelty_scores  # noqa: E402

PARTITIONS = 4
#: the checkout whose ``noveld`` this script imported: the replicas start in it, since
#: ``python -m`` puts the working directory ahead of ``PYTHONPATH`` (an A/B of two checkouts
#: by ``PYTHONPATH`` would otherwise run the current directory's code in every replica)
CHECKOUT = Path(noveld.__file__).resolve().parents[1]
#: documents produced before the replicas' busy time is counted (their first batches load
#: the compiled kernels)
WARM_UP_DOCS = 1024


def produce(bootstrap: str, topic: str, lines: list[bytes], rate: float, first: int = 0) -> None:
    """Every line in order, keyed by its line number (``first`` for the first line; the key
    picks the partition), at ``rate`` documents per second: a live stream the replicas keep up
    with, so each reads its partitions about as far as the others whatever N (a backlog would
    be read a partition at a time, in another order than the stream's)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5)
    t0 = time.perf_counter()
    for i, line in enumerate(lines):
        producer.send(topic, key=str(first + i).encode(), value=line)
        if i % 50 == 49:
            time.sleep(max(0.0, t0 + (i + 1) / rate - time.perf_counter()))
    producer.flush()
    producer.close()


def ready(port: int) -> bool:
    """Does the replica hold partitions (its /readyz)?"""
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5).status == 200
    except OSError:
        return False


def counters(port: int) -> tuple[float, float]:
    """Documents this replica committed (its ``noveld_documents_total`` counters) and the
    seconds its batches took (``noveld_batch_duration_seconds_sum``: every stage, no poll)."""
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
    except OSError:
        return 0.0, 0.0
    docs = seconds = 0.0
    for line in text.decode().splitlines():
        if line.startswith("noveld_documents_total"):
            docs += float(line.rsplit(" ", 1)[1])
        elif line.startswith("noveld_batch_duration_seconds_sum"):
            seconds += float(line.rsplit(" ", 1)[1])
    return docs, seconds


def read_events(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Every event on ``topic``, from the beginning until it stays quiet for 5 s, each with
    its message's timestamp (when the replica sent it) as ``_sent_ms``."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        consumer_timeout_ms=5000,
    )
    out = [{**json.loads(m.value), "_sent_ms": m.timestamp} for m in consumer]
    consumer.close()
    return out


def run_replicas(
    broker: KafkaBroker, server: RedisServer, n: int, lines: list[bytes], a: argparse.Namespace
) -> tuple[list[dict[str, Any]], list[float], list[float]]:
    """N replicas on a topic of their own, fed once all hold partitions: their events, the
    documents each committed and the share of the time each spent in batches after the
    first ``WARM_UP_DOCS`` documents (the rest it waits for input)."""
    ns = f"scale{n}"
    broker.create_topic(f"{ns}.in", PARTITIONS)
    broker.create_topic(f"{ns}.events", 1)
    broker.create_topic(f"{ns}.dlq", 1)
    ports = [free_port() for _ in range(n)]
    # batches fill up (--batch-size) at every N: a replica at 1/N of the rate waits longer
    env = {
        **os.environ,
        "NOVELD_BATCH__MAX_WAIT_MS": str(a.max_wait_ms),
        "NOVELD_KAFKA__FETCH_MAX_WAIT_MS": str(a.fetch_max_wait_ms),
    }
    if a.hold_docs is not None:
        env["NOVELD_NOVELTY__HOLD_DOCS"] = str(a.hold_docs)
    if a.whole_batches:
        env["NOVELD_BATCH__SHARE"] = "false"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "noveld.daemon.cli",
                "run",
                "--quiet",
                "--kafka-bootstrap",
                broker.bootstrap,
                "--input-topic",
                f"{ns}.in",
                "--events-topic",
                f"{ns}.events",
                "--dlq-topic",
                f"{ns}.dlq",
                "--group",
                ns,
                "--redis-url",
                server.url,
                "--namespace",
                ns,
                "--model",
                a.model,
                "--batch-size",
                str(a.batch_size),
                "--emit-assignment-batches",
                "--session-timeout-ms",
                str(TEST_SESSION_TIMEOUT_MS),
                "--metrics-port",
                str(port),
            ],
            env=env,
            cwd=CHECKOUT,
            stdout=subprocess.DEVNULL,
        )
        for port in ports
    ]
    client = redis.Redis.from_url(server.url)
    try:
        deadline = time.monotonic() + 1800
        while not all(ready(port) for port in ports):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise SystemExit(f"{n} replicas: a replica exited before joining the group")
            time.sleep(0.2)
        tail = [
            json.dumps({**json.loads(line), "id": f"tail-{i}"}).encode()
            for i, line in enumerate(lines[: a.tail])
        ]
        stream = lines + tail
        produce(broker.bootstrap, f"{ns}.in", stream[:WARM_UP_DOCS], a.rate)
        t0, before = time.perf_counter(), [counters(port) for port in ports]
        produce(broker.bootstrap, f"{ns}.in", stream[WARM_UP_DOCS:], a.rate, WARM_UP_DOCS)
        while int(client.hget(f"noveld:{{{ns}}}:counters", "docs") or 0) < len(lines) + a.tail:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise SystemExit(f"{n} replicas: a replica exited or the run took too long")
            time.sleep(0.2)
        end = [counters(port) for port in ports]
        wall = time.perf_counter() - t0
        busy = [(s_end - s0) / wall for (_, s0), (_, s_end) in zip(before, end, strict=True)]
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=60)
    return read_events(broker.bootstrap, f"{ns}.events"), [d for d, _ in end], busy


def score(rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> dict[str, float]:
    """Quality from the events, with every ``cluster.merged`` applied first."""
    index = {str(r["id"]): i for i, r in enumerate(rows)}
    labels = [str(r["label"]) for r in rows]
    assigned: dict[str, str] = {}
    at: dict[tuple[int, int], int] = {}
    into: dict[str, str] = {}
    born: list[dict[str, Any]] = []
    sizes: list[int] = []  # documents per documents.assigned event (batch and partition)
    delays: list[float] = []  # ms from a document's production to its assignment's sending
    for e in events:
        if e["type"] == "documents.assigned":
            sizes.append(len(e["assignments"]))
            for a in e["assignments"]:
                if a["doc_id"] not in index:
                    continue  # the unscored tail
                produced = datetime.fromisoformat(a["ts"]).timestamp() * 1000
                delays.append(e["_sent_ms"] - produced)
                assigned[a["doc_id"]] = a["cluster_id"]
                at[(e["partition"], a["offset"])] = index[a["doc_id"]]
        elif e["type"] == "cluster.merged":
            into[e["cluster_id"]] = e["into"]
        elif e["type"] == "cluster.born" and e["founding_doc_id"] in index:
            born.append(e)

    def final(c: str) -> str:
        for _ in range(1000):
            if c not in into:
                break
            c = into[c]
        return c

    missing = [r["id"] for r in rows if str(r["id"]) not in assigned]
    if missing:
        raise SystemExit(f"{len(missing)} documents have no documents.assigned event")
    pred = [final(assigned[str(r["id"])]) for r in rows]
    first: dict[str, tuple[int, int]] = {}  # announced story (final cluster) → earliest birth
    for b in born:
        founding = index[b["founding_doc_id"]]
        pos = b["confirmed_at"]
        confirmed = max(founding, at.get((pos["partition"], pos["offset"]), founding))
        c = final(b["cluster_id"])
        first[c] = min(first.get(c, (founding, confirmed)), (founding, confirmed))
    births = list(first.values())
    raw = Counter(labels[index[b["founding_doc_id"]]] for b in born)
    settled = Counter(labels[f] for f, _ in births)
    nov = novelty_scores(labels, births)
    return {
        "nmi": clustering_scores(labels, pred)["nmi"],
        "clusters": len(set(pred)),
        "born": len(born),
        "births": len(births),
        "stories": len(settled),
        "merged": len(into),
        "dup_raw": sum(1 for c in raw.values() if c >= 2),
        "dup": sum(1 for c in settled.values() if c >= 2),
        "precision": nov["novelty_precision"],
        "recall": nov["novelty_recall"],
        "per_event": statistics.median(sizes),
        "delay_ms": statistics.median(delays),
    }


def make_model(kind: str, young: int) -> Any:
    """The model ``kind`` with defaults and reconciliation horizon ``young`` (hdp: its topics
    are the vocabulary's first entries, as :func:`batches_for` lays them out)."""
    from noveld.models.dpmm import DPMM, DPMMConfig
    from noveld.models.hdp import HDP, HDPConfig

    if kind == "dpmm":
        return DPMM(DPMMConfig(young_steps=young))
    model = HDP(HDPConfig(young_steps=young))
    model.bind_topic_words(list(range(model.config.topics)))
    return model


def batches_for(kind: str, rows: list[dict[str, Any]], batch_size: int) -> list[Any]:
    """The stream featurized in batches (hdp: the topic entries first in the vocabulary)."""
    from noveld.featurize import Featurizer, Tokenizer
    from noveld.models.hdp import HDPConfig, topic_token
    from noveld.models.vocabulary import Vocabulary
    from noveld.schema import DecodedDocument

    docs = [DecodedDocument(id=str(r["id"]), text=str(r["text"])) for r in rows]
    vocab = Vocabulary()
    if kind == "hdp":
        vocab.extend(topic_token(t) for t in range(HDPConfig.topics))
    feat = Featurizer(Tokenizer(), vocab)
    return [feat.featurize(docs[i : i + batch_size])[0] for i in range(0, len(docs), batch_size)]


def model_cost(
    kind: str, rows: list[dict[str, Any]], batch_size: int, rounds: int
) -> tuple[float, float, float, float]:
    """Median docs/s of one replica's model step with reconciliation on and off, ABAB; then
    the model step's and a replay's median time per batch (ms): what a replica spends on a
    batch of its own and on each batch another replica committed."""
    from noveld.models.dpmm import DPMMConfig, replay_delta

    batches = batches_for(kind, rows, batch_size)
    n_docs = sum(len(b) for b in batches)
    steps: list[float] = []
    deltas = []

    def once(young: int) -> float:
        model = make_model(kind, young)
        stats = model.new_state()
        steps.clear()
        deltas.clear()
        t0 = time.perf_counter()
        for i, b in enumerate(batches):
            t = time.perf_counter()
            deltas.append(model.partial_fit(b, stats, np.random.default_rng(i)).delta)
            steps.append(time.perf_counter() - t)
        return n_docs / (time.perf_counter() - t0)

    on_steps = DPMMConfig.young_steps
    once(on_steps)  # JIT warm-up
    on, off = [], []
    for _ in range(rounds):
        off.append(once(0))
        on.append(once(on_steps))
    replica = make_model(kind, 0).new_state()
    replays = []
    for d in deltas:
        t = time.perf_counter()
        replay_delta(replica, d, 0.0)
        replays.append(time.perf_counter() - t)
    ms = 1e3 * statistics.median(steps), 1e3 * statistics.median(replays)
    return statistics.median(on), statistics.median(off), *ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_data_option(p)
    p.add_argument("--model", choices=["dpmm", "hdp"], default="dpmm", help="the replicas' model")
    p.add_argument("--replicas", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--rate", type=float, default=1000, help="documents produced per second")
    p.add_argument("--max-wait-ms", type=int, default=2000, help="the replicas' batch.max_wait_ms")
    p.add_argument("--fetch-max-wait-ms", type=int, default=100,
                   help="the replicas' kafka.fetch_max_wait_ms")  # fmt: skip
    p.add_argument("--tail", type=int, default=2048, help="unscored documents after the stream")
    p.add_argument("--hold-docs", type=int, help="the replicas' novelty.hold_docs")
    p.add_argument("--whole-batches", action="store_true",
                   help="each replica reads whole batches (batch.share off)")  # fmt: skip
    p.add_argument("--save-events", type=Path, help="write each N's events to DIR/events-N.json")
    p.add_argument("--cost-rounds", type=int, default=0, help="time reconciliation on/off")
    a = p.parse_args()
    rows = load_texts(a.data)
    if any("label" not in r for r in rows):
        raise SystemExit(f"{a.data}: every document needs a label to score against")
    lines = [json.dumps({"id": r["id"], "text": r["text"]}).encode() for r in rows]
    print(f"machine: {machine()}")
    print(f"replicas run noveld from {CHECKOUT}")
    stories = len({r["label"] for r in rows})
    print(
        f"data: {a.data} ({len(rows):,} docs, {stories} stories), model {a.model}, "
        f"{PARTITIONS} partitions, batch {a.batch_size} "
        f"({'whole' if a.whole_batches else 'shared'}), produced at {a.rate:,.0f} docs/s"
    )
    with KafkaBroker() as broker, RedisServer() as server:
        print(f"{'N':>2} {'NMI':>6} {'clusters':>8} {'births':>6} {'stories':>7} {'merged':>6} "
              f"{'dup raw':>7} {'dup':>4} {'nov P':>6} {'nov R':>6} {'batch':>5} {'busy':>4} "
              f"{'delay':>5}  docs per replica")  # fmt: skip
        for n in a.replicas:
            events, done, busy = run_replicas(broker, server, n, lines, a)
            if a.save_events is not None:
                a.save_events.mkdir(parents=True, exist_ok=True)
                (a.save_events / f"events-{n}.json").write_text(json.dumps(events))
            s = score(rows, events)
            print(
                f"{n:>2} {s['nmi']:6.3f} {s['clusters']:>8} {s['births']:>6} {s['stories']:>7} "
                f"{s['merged']:>6} "
                f"{s['dup_raw']:>7} {s['dup']:>4} {s['precision']:6.3f} {s['recall']:6.3f} "
                f"{s['per_event']:>5.0f} {statistics.median(busy):4.0%} "
                f"{s['delay_ms']:>5.0f}  " + " ".join(f"{d:,.0f}" for d in done),
                flush=True,
            )
    if a.cost_rounds:
        on, off, step_ms, replay_ms = model_cost(a.model, rows, a.batch_size, a.cost_rounds)
        print(
            f"one replica's model step: reconciliation on {on:,.0f} docs/s, off {off:,.0f} "
            f"docs/s (median of {a.cost_rounds}, alternating; {on / off - 1:+.1%})"
        )
        print(
            f"per batch of {a.batch_size}: model step {step_ms:.2f} ms, replaying another "
            f"replica's delta {replay_ms:.2f} ms (medians)"
        )


if __name__ == "__main__":
    main()
