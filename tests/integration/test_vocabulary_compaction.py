"""Vocabulary compaction end to end: with forgetting, the words of stories gone from the stream
leave the vocabulary, and nothing else changes — the same events, the same clusters over the
same words — in a file run with a snapshot (resumed or not), in Redis with one writer, and with
two writers sharing a namespace (the other writer's old word ids are refused, it reloads and
reads its batch again: nothing lost or counted twice)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import redis
from cli_runner import noveld
from doubles import CollectingDlq, NoDlq
from helpers.redis_commits import recorded_commits
from streams import fading_stories

from noveld.connectors.jsonl import Record
from noveld.daemon.pipeline import Pipeline, StateDiverged
from noveld.daemon.settings import Settings, load_settings, model_fingerprint
from noveld.daemon.sinks import CollectingEvents
from noveld.models.vocabulary import Vocabulary
from noveld.schema import SourcePosition
from noveld.state.base import CommitOutcome, NamespaceState, state_digest
from noveld.state.memory import MemoryStore, read_snapshot
from noveld.state.redis.store import RedisStore

pytestmark = pytest.mark.integration

N = 3000
#: forgetting, and the words' model unless a test says otherwise: the encoder gives the
#: stream's made-up words ("s3w1") one vector
FORGETTING = ["--half-life", "50", "--batch-size", "50", "--featurizer", "words"]
HYBRID_DIM = 256  # the built-in encoder's default dimension: 512 reserved entries


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("compaction") / "fading.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in fading_stories(N)))
    return path


@pytest.fixture(scope="module")
def returnless_stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """No word comes back once its story has faded: hdp draws its samples in word-id order,
    and a word that returns after it was compacted out has a new id (see the test)."""
    path = tmp_path_factory.mktemp("compaction") / "fading-returnless.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in fading_stories(N, returns=0.0)))
    return path


@pytest.fixture(scope="module")
def hybrid_stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("compaction") / "fading-hybrid.jsonl"
    docs = fading_stories(N, embedding_dim=HYBRID_DIM)
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


@pytest.fixture(scope="module")
def embedded_stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("compaction") / "fading-embedded.jsonl"
    docs = fading_stories(N, embedding_dim=8)
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


def words_ever(docs: list[dict[str, Any]]) -> int:
    return len({w for d in docs for w in d["text"].split()})


def run_file(stream: Path, state_dir: Path, compact_at: int, *extra: str) -> list[str]:
    out = noveld(
        "run", "--input", str(stream), "--state-dir", str(state_dir),
        "--compact-vocabulary-at", str(compact_at), *FORGETTING, *extra,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    return out.stdout.splitlines()


def clusters(state: NamespaceState) -> dict[int, tuple[float, float, dict[str, float]]]:
    """Each live cluster's mass, tokens and word counts, by uid and word (not word id)."""
    s = state.stats
    out = {}
    for k in s.active_slots().tolist():
        ws, cs = s.word_counts(k)
        words = {state.vocab[int(w)]: float(c) for w, c in zip(ws, cs, strict=True)}
        out[int(s.uid[k])] = (float(s.m[k] * s.scale), float(s.ntok[k] * s.scale), words)
    return out


def assert_same_clusters(a: NamespaceState, b: NamespaceState) -> None:
    """Equal up to the last bits of float sums (faded counts are taken off in word order)."""
    ca, cb = clusters(a), clusters(b)
    assert ca.keys() == cb.keys()
    for uid, (m, n, words) in ca.items():
        m2, n2, words2 = cb[uid]
        assert math.isclose(m, m2, rel_tol=1e-12) and math.isclose(n, n2, rel_tol=1e-12)
        assert words.keys() == words2.keys()
        assert all(math.isclose(c, words2[w], rel_tol=1e-12) for w, c in words.items())


def v_of(state: NamespaceState) -> int:
    return len(state.vocab) + Vocabulary.from_list(state.vocab, state.vocab_gone).dropped


LIKELIHOODS = {
    "multinomial": ["--featurizer", "words"],
    "edcm": ["--likelihood", "edcm"],
    "vmf": ["--likelihood", "vmf", "--embedding-dim", "8", "--vmf-cosine", "0.9"],
    "hdp": ["--model", "hdp", "--topics", "64"],
    # the documents' own vectors stand in for the encoder's (the encoder gives made-up
    # words such as "s3w1" one vector: a single cluster)
    "hybrid": [
        "--likelihood",
        "hybrid",
        "--featurizer",
        "hybrid",
        "--encoder-dim",
        str(HYBRID_DIM),
    ],
}


@pytest.mark.parametrize("likelihood", sorted(LIKELIHOODS))
def test_a_compacted_file_run_emits_and_keeps_what_an_uncompacted_one_does(
    likelihood: str,
    stream: Path,
    embedded_stream: Path,
    returnless_stream: Path,
    hybrid_stream: Path,
    tmp_path: Path,
) -> None:
    """Byte-for-byte the same events and the same clusters over the same words, also with
    words that come back after they were compacted out (they take a new id, so MAP seating's
    sums over a document's words may add in another order: last bits only). hdp samples in
    word-id order, so a returning word would change which draw each token gets — equally valid
    samples, not the same ones: its stream has none."""
    if likelihood == "vmf":
        stream = embedded_stream
    if likelihood == "hdp":
        stream = returnless_stream
    if likelihood == "hybrid":
        stream = hybrid_stream
    docs = [json.loads(line) for line in stream.read_text().splitlines()]
    options = LIKELIHOODS[likelihood]
    plain = run_file(stream, tmp_path / "plain", 0, *options)
    compacted = run_file(stream, tmp_path / "compacted", 100, *options)
    assert plain == compacted and len(plain) > 20  # every event, byte for byte
    a, _ = read_snapshot(tmp_path / "plain" / "state.npz")
    b, _ = read_snapshot(tmp_path / "compacted" / "state.npz")
    with (
        np.load(tmp_path / "plain" / "state.npz") as za,
        np.load(tmp_path / "compacted" / "state.npz") as zb,
    ):  # format 2 marks a compacted snapshot: a noveld reading only format 1 refuses it
        formats = [json.loads(bytes(z["meta"]).decode())["format"] for z in (za, zb)]
    assert formats == [1, 2]
    reserved = sum(w.startswith("\x00") for w in a.vocab)  # edcm bins, vmf dimensions
    assert reserved == sum(w.startswith("\x00") for w in b.vocab)  # all kept
    assert len(a.vocab) == words_ever(docs) + reserved  # never compacted: every word kept
    assert len(b.vocab) < len(a.vocab) * 0.7  # the gone stories' words left
    assert b.vocab_gone.shape[0] > 0
    assert v_of(b) == v_of(a) == words_ever(docs) + reserved  # the prior counts every word
    assert_same_clusters(a, b)
    # resumed from a snapshot taken after compactions: the same as one run over the file
    growing = tmp_path / "growing.jsonl"
    lines = stream.read_text().splitlines(keepends=True)
    growing.write_text("".join(lines[: 2 * N // 3]))
    first = run_file(growing, tmp_path / "resumed", 100, *options)
    mid, _ = read_snapshot(tmp_path / "resumed" / "state.npz")
    assert mid.vocab_gone.shape[0] > 0  # it had compacted before the stop
    growing.write_text("".join(lines))
    resumed = first + run_file(growing, tmp_path / "resumed", 100, *options)
    assert resumed == run_file(growing, tmp_path / "one-run", 0, *options)


#: the hybrid likelihood over the hybrid featurizer, the documents' own vectors standing in for
#: the encoder's; its 512 reserved dimension entries must neither block nor be lost to a compaction
HYBRID = {"likelihood": "hybrid", "featurizer": "hybrid", "encoder_dim": HYBRID_DIM}
WORDS = {"featurizer": "words"}
MODELS = pytest.mark.parametrize("model", [WORDS, HYBRID], ids=["multinomial", "hybrid"])


def settings_for(
    tmp_path: Path,
    ns: str,
    compact_at: int,
    model: dict[str, Any] | None = None,
    refresh: bool = True,
) -> Settings:
    return load_settings(
        None,
        {
            "namespace": ns,
            "dlq": str(tmp_path / "dlq.jsonl"),
            "model": {"deterministic": True, "half_life_docs": 50.0, **(model or WORDS)},
            "state": {"compact_vocabulary_at": compact_at},
            "batch": {"refresh": refresh},
        },
    )


def stories(n: int, model: dict[str, Any]) -> list[dict[str, Any]]:
    """The fading stories, with vectors of their stories for the hybrid."""
    return fading_stories(n, embedding_dim=HYBRID_DIM if model == HYBRID else 0)


def records(docs: list[dict[str, Any]], topic: str, partition: int) -> list[Record]:
    return [
        Record(
            json.dumps(
                {"id": f"{topic}-{partition}-{d['id']}", "text": d["text"]}
                | ({"embedding": d["embedding"]} if "embedding" in d else {})
            ).encode(),
            SourcePosition(topic=topic, partition=partition, offset=i),
        )
        for i, d in enumerate(docs)
    ]


def step(pipe: Pipeline, chunk: list[Record]) -> Any:
    key = f"{chunk[0].position.topic}:{chunk[0].position.partition}"
    return pipe.step(chunk, {key: chunk[0].position.offset}, {key: chunk[-1].position.offset + 1})


def redis_pipeline(client: redis.Redis, settings: Settings, keys: list[str]) -> Pipeline:
    store = RedisStore(client, settings.namespace)
    pipe = Pipeline(settings, store, CollectingEvents(), NoDlq())
    store.claim(keys)
    return pipe


def strip(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events without what names the namespace (event ids hash it)."""
    return [{k: v for k, v in e.items() if k not in ("event_id", "namespace")} for e in events]


@MODELS
def test_one_redis_writer_compacts_and_a_fresh_load_sees_the_same(
    model: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    docs = stories(N, model)
    recs = records(docs, "in", 0)
    memory = Pipeline(
        settings_for(tmp_path, "mem", 0, model), MemoryStore(None), CollectingEvents(), NoDlq()
    )
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path, "cmp", 100, model)
    pipe = redis_pipeline(client, settings, ["in:0"])
    compactions = 0
    for i in range(0, N, 50):
        step(memory, recs[i : i + 50])
        compactions += step(pipe, recs[i : i + 50]).vocabulary_compacted
    assert compactions >= 2
    assert isinstance(memory.events, CollectingEvents) and isinstance(pipe.events, CollectingEvents)
    assert strip(pipe.events.events) == strip(memory.events.events)
    meta = client.hgetall("noveld:{cmp}:meta")
    assert int(meta[b"vocab_gen"]) == compactions
    assert meta[b"schema"] == b"3"  # a noveld reading only schema 2 refuses it
    assert 0 < int(meta[b"vocab_checked"]) <= client.llen("noveld:{cmp}:vocab")
    reserved = 2 * HYBRID_DIM if model == HYBRID else 0  # the vector dimensions' entries, all kept
    assert client.llen("noveld:{cmp}:vocab") == len(pipe.vocab) < words_ever(docs) / 2 + reserved
    assert sum(w.startswith("\x00") for w in pipe.vocab.to_list()) == reserved
    assert not client.keys("noveld:{cmp}:vocab_*next*")  # the staged keys became vocab
    assert client.ttl("noveld:{cmp}:vocab") == client.ttl("noveld:{cmp}:vocab_idx") == -1
    # the log holds only entries after the last compaction's checkpoint (old ids are gone)
    first = client.xrange("noveld:{cmp}:log", "-", "+", count=1)
    if first:
        assert int(first[0][0].split(b"-")[0]) > int(meta[b"ckpt_seq"])
    fresh = RedisStore(client, "cmp").load(model_fingerprint(settings))
    assert fresh is not None
    pipe._sync_state()
    assert state_digest(fresh) == state_digest(pipe.state)
    memory._sync_state()
    assert v_of(fresh) == v_of(memory.state) == words_ever(docs) + reserved
    assert_same_clusters(fresh, memory.state)


class Killed(BaseException):
    """The process dies here (not an error anything could catch and go on from)."""


@MODELS
def test_a_crash_between_a_commit_and_its_compaction_compacts_where_a_clean_run_does(
    model: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    """The batch that crosses a check's document count commits, then the process dies before
    the compaction. The restarted process finds the check undone (its count is kept with the
    novelty state) and runs it before its first batch, on the state the commit left: the same
    word ids, state and events as a run that never died."""
    recs = records(stories(N, model), "in", 0)
    client = redis.Redis.from_url(redis_url)
    clean = redis_pipeline(client, settings_for(tmp_path, "clean", 100, model), ["in:0"])
    for i in range(0, N, 50):
        step(clean, recs[i : i + 50])
    crashed = redis_pipeline(client, settings_for(tmp_path, "crash", 100, model), ["in:0"])

    def dies(*args: Any, **kwargs: Any) -> bool:
        raise Killed

    crashed.store.compact_vocabulary = dies  # type: ignore[method-assign]
    i = 0
    with pytest.raises(Killed):
        for i in range(0, N, 50):
            step(crashed, recs[i : i + 50])
    assert client.hget("noveld:{crash}:offsets", "in:0") == str(i + 50).encode()  # committed
    assert not client.hget("noveld:{crash}:meta", "vocab_gen")  # not compacted
    assert isinstance(crashed.events, CollectingEvents)
    before = crashed.events.events
    resumed = redis_pipeline(client, settings_for(tmp_path, "crash", 100, model), ["in:0"])
    first = step(resumed, recs[i + 50 : i + 100])
    assert first.vocabulary_compacted  # the check it owed, before its first batch
    for j in range(i + 100, N, 50):
        step(resumed, recs[j : j + 50])
    clean._sync_state()
    resumed._sync_state()
    assert resumed.state.vocab == clean.state.vocab  # the same word ids
    assert state_digest(resumed.state) == state_digest(clean.state)
    assert isinstance(clean.events, CollectingEvents) and isinstance(
        resumed.events, CollectingEvents
    )
    events = list({e["event_id"]: e for e in before + resumed.events.events}.values())

    def ordered(evs: list[dict[str, Any]]) -> list[str]:  # a batch's retirements: slot order
        return sorted(json.dumps(e, sort_keys=True) for e in strip(evs))

    assert ordered(events) == ordered(clean.events.events)


@MODELS
def test_two_writers_end_every_cluster_they_announced(
    model: dict[str, Any], redis_url: str, tmp_path: Path
) -> None:
    """Each compaction makes the other writer reload, which replaces its own record of the
    clusters it announced with the shared one; and a writer may retire a cluster the other
    announced. Ends it did not announce are offered to the store, which keeps those another
    writer announced: every announced cluster that is gone has exactly one end event."""
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path, "ends", 100, model)
    pipes = {p: redis_pipeline(client, settings, [f"in:{p}"]) for p in (0, 1)}
    docs = stories(2 * N, model)
    recs = {0: records(docs[0::2], "in", 0), 1: records(docs[1::2], "in", 1)}
    done = {0: 0, 1: 0}
    reloads = 0
    while min(done.values()) < N:
        for p, pipe in pipes.items():
            if done[p] >= N:
                continue
            try:
                step(pipe, recs[p][done[p] : done[p] + 50])
            except StateDiverged:
                reloads += 1
                pipe.reload()
                continue
            done[p] += 50
    assert reloads >= 2
    events = [e for pipe in pipes.values() for e in pipe.events.events]  # type: ignore[attr-defined]
    born = [e["cluster_id"] for e in events if e["type"] == "cluster.born"]
    ended = [e["cluster_id"] for e in events if e["type"] in ("cluster.retired", "cluster.merged")]
    fresh = RedisStore(client, "ends").load(model_fingerprint(settings))
    assert fresh is not None
    alive = {f"c{int(u)}" for u in fresh.stats.uid[fresh.stats.active_slots()].tolist()}
    gone = set(born) - alive
    assert len(gone) > 50
    assert sorted(c for c in ended if c in set(born)) == sorted(gone)  # each once


def test_the_other_writer_is_refused_reloads_and_reads_its_batch_again(
    redis_url: str, tmp_path: Path
) -> None:
    """Two writers, one namespace, one partition each. After A compacts, B's next commit is
    refused as stale (and so is B's interning of new words); B reloads the shared state and
    does the same batch again. Every document is counted once; the namespace loads to what
    each writer holds."""
    client = redis.Redis.from_url(redis_url)
    settings = settings_for(tmp_path, "two", 100)
    a = redis_pipeline(client, settings, ["in:0"])
    b = redis_pipeline(client, settings, ["in:1"])
    docs = fading_stories(2 * N)
    recs = {0: records(docs[0::2], "in", 0), 1: records(docs[1::2], "in", 1)}
    done = {0: 0, 1: 0}
    stale = {0: 0, 1: 0}
    compactions = 0
    while min(done.values()) < N:
        for p, pipe in ((0, a), (1, b)):
            chunk = recs[p][done[p] : done[p] + 50]
            if not chunk:
                continue
            try:
                compactions += step(pipe, chunk).vocabulary_compacted
            except StateDiverged as exc:
                assert exc.outcome is CommitOutcome.STALE
                assert pipe.refusal is CommitOutcome.STALE
                stale[p] += 1
                offsets = client.hgetall("noveld:{two}:offsets")
                assert int(offsets.get(f"in:{p}".encode(), 0)) == done[p]  # nothing of it kept
                pipe.reload()  # and the same chunk again below
                continue
            done[p] += len(chunk)
    assert compactions >= 2 and sum(stale.values()) >= 2
    counters = client.hgetall("noveld:{two}:counters")
    assert int(counters[b"docs"]) == 2 * N  # nothing lost, nothing twice
    fresh = RedisStore(client, "two").load(model_fingerprint(settings))
    assert fresh is not None
    assert fresh.offsets == {"in:0": N, "in:1": N}
    assert v_of(fresh) == words_ever(docs)
    # the last writer to commit holds the namespace exactly; the other, once it reloads
    for pipe in (a, b):
        pipe.reload()
        pipe._sync_state()
        assert state_digest(pipe.state) == state_digest(fresh)


def b_behind_a_compaction(client: redis.Redis, tmp_path: Path, ns: str) -> Pipeline:
    """Writer B (partition 1) of namespace ``ns`` after B commits a batch and writer A
    (partition 0) reads until its first compaction: B's word ids are the old generation's."""
    settings = settings_for(tmp_path, ns, 100)
    a = redis_pipeline(client, settings, ["in:0"])
    b = redis_pipeline(client, settings, ["in:1"])
    docs = fading_stories(N)
    step(b, records(docs[:50], "in", 1))
    recs = records(docs, "in", 0)
    for i in range(0, N, 50):
        if step(a, recs[i : i + 50]).vocabulary_compacted:
            return b
    raise AssertionError("no compaction")


def test_interning_new_words_after_the_others_compaction_is_refused(
    redis_url: str, tmp_path: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    b = b_behind_a_compaction(client, tmp_path, "intern")
    gen = int(client.hget("noveld:{intern}:meta", "vocab_gen"))
    words = client.llen("noveld:{intern}:vocab")
    novel = [Record(json.dumps({"id": "x", "text": "zyzzyva quokka"}).encode(),
                    SourcePosition(topic="in", partition=1, offset=50))]  # fmt: skip
    with pytest.raises(StateDiverged, match="compacted") as caught:
        step(b, novel)
    assert caught.value.outcome is CommitOutcome.STALE
    assert client.llen("noveld:{intern}:vocab") == words  # nothing interned under old ids
    assert int(client.hget("noveld:{intern}:meta", "vocab_gen")) == gen
    b.reload()
    step(b, novel)
    assert np.all([w in b.vocab for w in ("zyzzyva", "quokka")])


def test_a_commit_in_old_word_ids_is_refused(redis_url: str, tmp_path: Path) -> None:
    """B's batch uses only words B already knows, so it interns nothing: the commit itself
    must refuse B's delta, whose word ids a compaction has given to other words."""
    client = redis.Redis.from_url(redis_url)
    b = b_behind_a_compaction(client, tmp_path, "oldids")
    seq = client.hget("noveld:{oldids}:meta", "seq")
    known = [Record(json.dumps({"id": "y", "text": "common1 common2"}).encode(),
                    SourcePosition(topic="in", partition=1, offset=50))]  # fmt: skip
    assert all(w in b.vocab for w in ("common1", "common2"))
    with pytest.raises(StateDiverged, match="compacted the shared vocabulary") as caught:
        step(b, known)
    assert caught.value.outcome is CommitOutcome.STALE
    assert client.hget("noveld:{oldids}:meta", "seq") == seq  # no entry in old ids
    assert client.hget("noveld:{oldids}:offsets", "in:1") == b"50"


def test_bad_records_of_a_refused_batch_count_once_towards_the_breaker(
    redis_url: str, tmp_path: Path
) -> None:
    """A batch refused as stale is read again after the reload: its bad records are dead
    letters again (at least once, as after a crash), but the run of consecutive bad records
    the circuit breaker counts is where it was before the batch."""
    client = redis.Redis.from_url(redis_url)
    b = b_behind_a_compaction(client, tmp_path, "badrun")
    bad = [Record(b"not json", SourcePosition(topic="in", partition=1, offset=o)) for o in (50, 51)]
    b.dead_letters = dlq = CollectingDlq()
    with pytest.raises(StateDiverged) as caught:
        step(b, bad)
    assert caught.value.outcome is CommitOutcome.STALE
    assert b.consecutive_invalid == 0
    b.reload()
    step(b, bad)
    assert b.consecutive_invalid == 2  # not 4
    assert len(dlq.sent) == 4
    assert client.hget("noveld:{badrun}:offsets", "in:1") == b"52"


def test_a_compacted_namespace_exports_and_imports_whole(
    redis_url: str, stream: Path, tmp_path: Path
) -> None:
    """``state export``/``import`` carry the gone words' record: the imported namespace has the
    same digest (which counts V) and words_seen, and resumes without reading anything again."""
    src = ["--redis-url", redis_url, "--namespace", "cmp-src"]
    dst = ["--redis-url", redis_url, "--namespace", "cmp-dst"]
    out = noveld("run", "--input", str(stream), *src, "--compact-vocabulary-at", "100",
                 *FORGETTING, "--dlq", str(tmp_path / "d.jsonl"))  # fmt: skip
    assert out.returncode == 0, out.stderr

    def show(target: list[str]) -> dict[str, Any]:
        shown = noveld("state", "show", *target, "--json")
        assert shown.returncode == 0, shown.stderr
        info: dict[str, Any] = json.loads(shown.stdout)
        return info

    before = show(src)
    docs = [json.loads(line) for line in stream.read_text().splitlines()]
    assert before["vocab"] < before["words_seen"] == words_ever(docs)
    backup = tmp_path / "backup.npz"
    assert noveld("state", "export", str(backup), *src).returncode == 0
    assert noveld("state", "import", str(backup), *dst).returncode == 0
    after = show(dst)
    for key in ("digest", "vocab", "words_seen", "docs", "offsets"):
        assert after[key] == before[key], key
    again = noveld("run", "--input", str(stream), *dst, "--compact-vocabulary-at", "100",
                   *FORGETTING, "--dlq", str(tmp_path / "d2.jsonl"))  # fmt: skip
    assert again.returncode == 0 and again.stdout == ""
    # the import's vocabulary generation is one no writer holds: a replica still running on
    # the namespace it replaced is refused as stale, and a lost vocab_gone key is named
    client = redis.Redis.from_url(redis_url)
    gens = [int(client.hget(f"noveld:{{{ns}}}:meta", "vocab_gen")) for ns in ("cmp-src", "cmp-dst")]
    assert gens[0] > 0 and gens[1] >= 1 << 32
    client.delete("noveld:{cmp-dst}:vocab_gone")
    lost = noveld("state", "show", *dst)
    assert lost.returncode == 6 and "vocab_gone key is gone" in lost.stderr, lost.stderr


def test_a_compaction_right_after_the_others_commit_makes_it_reload(
    redis_url: str, tmp_path: Path
) -> None:
    """The race the generation check cannot refuse: B's commit lands, then A commits and
    compacts before B takes in the entries other writers appended meanwhile. B finds them
    trimmed, loads the namespace afresh — renumbered — and must rebuild its vocabulary and
    novelty state from it before its next batch (else it would write old ids under the new
    generation)."""
    client = redis.Redis.from_url(redis_url)
    # B takes A's entries in at its commit only (a pre-seat refresh would take them first)
    settings = settings_for(tmp_path, "race", 100, refresh=False)
    a = redis_pipeline(client, settings, ["in:0"])
    b = redis_pipeline(client, settings, ["in:1"])
    docs = fading_stories(2 * N)
    recs = {0: records(docs[0::2], "in", 0), 1: records(docs[1::2], "in", 1)}
    done = {0: 0, 1: 0}

    def feed(p: int, pipe: Pipeline) -> None:
        step(pipe, recs[p][done[p] : done[p] + 50])
        done[p] += 50

    for _ in range(10):  # both write: statistics and words to compact
        feed(0, a)
        feed(1, b)
    feed(0, a)  # an entry B has not taken in yet
    store_b = b.store
    assert isinstance(store_b, RedisStore)
    original = store_b._apply_foreign

    def a_compacts_first(state: NamespaceState, after: int, upto: int) -> None:
        feed(0, a)  # A commits after B's commit (taking in B's entry) ...
        assert a.compact_vocabulary()  # ... and compacts: the log is trimmed, ids renumbered
        original(state, after, upto)

    store_b._apply_foreign = a_compacts_first  # type: ignore[method-assign]
    commits = recorded_commits(store_b)
    feed(1, b)
    store_b._apply_foreign = original  # type: ignore[method-assign]
    assert commits[-1].vocabulary_moved  # B's commit was followed by a fresh load (the race ran)
    shared = [w.decode() for w in client.lrange("noveld:{race}:vocab", 0, -1)]
    assert b.vocab.to_list() == shared  # B's ids are the renumbered ones
    for _ in range(5):
        feed(1, b)
        feed(0, a)
    fresh = RedisStore(client, "race").load(model_fingerprint(settings))
    assert fresh is not None
    assert int(client.hget("noveld:{race}:counters", "docs")) == done[0] + done[1]
    for pipe in (a, b):
        pipe._sync_state()
    a_state, b_state = a.state, b.state
    b.reload()
    b._sync_state()
    assert state_digest(b.state) == state_digest(fresh)
    assert a_state.vocab == fresh.vocab  # the last writer holds the namespace's words
    assert b_state.vocab[: len(shared)] == shared


def test_a_lost_record_of_gone_words_is_named_at_start_up(
    redis_url: str, stream: Path, tmp_path: Path
) -> None:
    """Without ``vocab_gone`` a compacted namespace would load with a smaller V — the model
    silently changed — so the start stops with exit 6 and says which key is missing."""
    target = ["--redis-url", redis_url, "--namespace", "nogone"]
    out = noveld("run", "--input", str(stream), *target, "--compact-vocabulary-at", "100",
                 *FORGETTING, "--dlq", str(tmp_path / "d.jsonl"))  # fmt: skip
    assert out.returncode == 0, out.stderr
    client = redis.Redis.from_url(redis_url)
    assert int(client.hget("noveld:{nogone}:meta", "vocab_gen")) > 0
    client.delete("noveld:{nogone}:vocab_gone")
    rerun = ["run", "--input", str(stream), *target, *FORGETTING, "--dlq", str(tmp_path / "e")]
    for cmd in (rerun, ["state", "show", *target]):
        proc = noveld(*cmd)
        assert proc.returncode == 6, proc.stderr
        assert "gone or damaged" in proc.stderr and "vocab_gone key is gone" in proc.stderr
        assert "Traceback" not in proc.stderr
