"""`--likelihood vmf` end to end: the noveld CLI on a generated embedding stream (events, resume,
SIGKILL chaos, determinism, bad embeddings to the DLQ, settings errors) and the Redis store
rebuilding the live model after every commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from cli_runner import noveld
from helpers.cli_runs import (
    assert_kills_match_a_clean_run,
    events_of,
    generated,
    seeded_runs,
    state_show,
)
from helpers.redis_commits import rebuilt_after_every_commit

from noveld.daemon.settings import load_settings

pytestmark = pytest.mark.integration

DIM = 64
VMF = ["--likelihood", "vmf", "--embedding-dim", str(DIM)]
LONG = 80_000
EMBEDDINGS = ("--embeddings", str(DIM), "--embedding-cosine", "0.6")


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated(tmp_path_factory.mktemp("vmf") / "emb.jsonl", 4000, 9, 30, *EMBEDDINGS)


@pytest.fixture(scope="module")
def long_stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated(tmp_path_factory.mktemp("vmf") / "long.jsonl", LONG, 4, 30, *EMBEDDINGS)


def test_run_clusters_embeddings_emits_events_and_resumes(stream: Path, tmp_path: Path) -> None:
    st = tmp_path / "state"
    first = noveld("run", "--input", str(stream), "--state-dir", str(st), *VMF)
    assert first.returncode == 0, first.stderr
    born = [e for e in events_of(first.stdout) if e["type"] == "cluster.born"]
    assert len(born) >= 20 and len({e["event_id"] for e in born}) == len(born)
    for e in born:
        assert e["size"] >= 3 and e["exemplar_doc_ids"] and e["model"] == "dpmm"
        # top terms come from the documents' text; the dimensions never show up as words
        assert e["top_terms"] and all(not t.startswith("\x00") for t, _ in e["top_terms"])
    info = state_show(st)
    assert info["docs"] == 4000 and info["mass"] == pytest.approx(4000)
    again = noveld("run", "--input", str(stream), "--state-dir", str(st), *VMF)
    assert again.returncode == 0 and again.stdout == ""
    assert state_show(st)["docs"] == 4000
    # the fingerprint holds the cosine that sets κ
    other = noveld(
        "run", "--input", str(stream), "--state-dir", str(st), *VMF, "--vmf-cosine", ".7"
    )
    assert other.returncode == 2 and "vmf_cosine" in other.stderr


def test_evaluate_reaches_a_quality_floor(stream: Path) -> None:
    out = noveld("evaluate", str(stream), "--json", *VMF)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["docs"] == 4000
    assert report["nmi"] >= 0.95  # measured 0.99+ on this stream
    assert report["novelty_precision"] >= 0.8


def test_same_seed_same_state_and_events_with_sampled_seating(stream: Path, tmp_path: Path) -> None:
    runs = seeded_runs(stream, tmp_path, 5, tuple(VMF))
    assert runs[0] == runs[1] and runs[0][1]


@pytest.mark.faults
@pytest.mark.slow
def test_sigkill_chaos_loses_nothing_and_counts_nothing_twice(
    long_stream: Path, tmp_path: Path
) -> None:
    """Crash safety for vmf: SIGKILLs after snapshots, then a resume, give the clean run's
    state hash and the same birth events."""
    info = assert_kills_match_a_clean_run(
        long_stream, tmp_path, LONG, extra=tuple(VMF), pause=(0.0, 0.3), seed=3
    )
    assert info["mass"] == pytest.approx(LONG)


def test_bad_embeddings_go_to_the_dlq_and_processing_continues(tmp_path: Path) -> None:
    good = [
        json.dumps({"id": f"d{i}", "embedding": [1.0 if j == i % 3 else 0.01 for j in range(4)]})
        for i in range(30)
    ]
    bad = [
        json.dumps({"id": "t", "text": "words but no embedding"}),
        json.dumps({"id": "z", "embedding": [0, 0, 0, 0]}),
        json.dumps({"id": "w", "embedding": [0.1, 0.2, 0.3]}),
        '{"id": "n", "embedding": [0.1, NaN, 0.3, 0.4]}',
        json.dumps({"id": "b", "embedding": [True, 0.2, 0.3, 0.4]}),
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(good[:10] + bad + good[10:]) + "\n")
    dlq = tmp_path / "dlq.jsonl"
    out = noveld(
        "run", "--input", str(src), "--dlq", str(dlq), "--likelihood", "vmf", "--embedding-dim", "4"
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    dead = {d["offset"]: d for d in map(json.loads, dlq.read_text().splitlines())}
    assert {k: d["reason"] for k, d in dead.items()} == {
        10: "empty_content",
        11: "empty_content",
        12: "wrong_dimension",
        13: "nan_embedding",
        14: "bad_field",
    }
    assert "no embedding" in dead[10]["detail"] and "zero" in dead[11]["detail"]
    assert "done — 30 docs" in out.stderr


def test_demo_generates_and_clusters_embeddings() -> None:
    out = noveld("demo", "--likelihood", "vmf", "--embedding-dim", "48", "--docs", "2000")
    assert out.returncode == 0, out.stderr
    assert "cluster.born" in out.stdout and "NMI" in out.stdout
    nmi = float(out.stdout.rsplit("NMI ", 1)[1].split()[0])
    assert nmi >= 0.9  # measured 0.99+


def test_settings_errors_are_one_line(tmp_path: Path) -> None:
    out = noveld(
        "run", "--input", "-", "--likelihood", "vmf", "--featurizer", "words", input_text=""
    )
    assert out.returncode == 2 and "embedding_dim" in out.stderr and "Traceback" not in out.stderr
    out = noveld("run", "--input", "-", *VMF, "--model", "svi", input_text="")
    assert out.returncode == 2 and "dpmm option" in out.stderr
    out = noveld("run", "--input", "-", *VMF, "--vmf-cosine", "1.5", input_text="")
    assert out.returncode == 2 and "vmf_cosine" in out.stderr


def test_redis_rebuilds_the_live_vmf_model_after_every_commit(
    redis_url: str, stream: Path, tmp_path: Path
) -> None:
    """The resultants ride in the count store's delta log: a model reloaded from Redis
    (checkpoint + log) has exactly the live model's digest after every commit."""
    client = redis.Redis.from_url(redis_url)
    settings = load_settings(
        None,
        {
            "namespace": "vmf",
            "dlq": str(tmp_path / "dlq.jsonl"),
            "model": {"likelihood": "vmf", "embedding_dim": DIM, "half_life_docs": 1500.0},
        },
    )
    code, compared, _ = rebuilt_after_every_commit(client, settings, stream, checkpoint_every=5)
    assert code == 0 and len(compared) == 16 and all(compared)
