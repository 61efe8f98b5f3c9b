"""``--likelihood hybrid --featurizer hybrid`` end to end: the noveld CLI on a generated stream
whose texts carry the stories (so do the encoder's vectors of them): quality, resume,
fingerprint refusal across featurizers, and SIGKILL chaos in file mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
from cli_runner import noveld
from helpers.cli_runs import assert_kills_match_a_clean_run, events_of, generated, state_show
from helpers.redis_commits import rebuilt_after_every_commit

from noveld.daemon.settings import load_settings

pytestmark = pytest.mark.integration

HYBRID = ["--likelihood", "hybrid", "--featurizer", "hybrid"]
SEMANTIC = ["--likelihood", "vmf", "--featurizer", "semantic"]
LONG = 30_000


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated(tmp_path_factory.mktemp("hybrid") / "gen.jsonl", 3000, 9)


@pytest.fixture(scope="module")
def long_stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generated(tmp_path_factory.mktemp("hybrid") / "long.jsonl", LONG, 4)


def test_evaluate_reaches_a_quality_floor(stream: Path) -> None:
    out = noveld("evaluate", str(stream), "--json", *HYBRID)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["docs"] == 3000 and report["invalid_records"] == 0
    assert report["nmi"] >= NMI_FLOOR
    assert report["novelty_precision"] >= PRECISION_FLOOR
    assert report["novelty_recall"] >= RECALL_FLOOR


def test_semantic_vmf_clusters_text_without_an_embedding_field(stream: Path) -> None:
    out = noveld("evaluate", str(stream), "--json", *SEMANTIC)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["docs"] == 3000 and report["nmi"] >= SEMANTIC_NMI_FLOOR


def test_run_resumes_and_a_state_is_refused_under_another_featurizer(
    stream: Path, tmp_path: Path
) -> None:
    st = tmp_path / "state"
    first = noveld("run", "--input", str(stream), "--state-dir", str(st), *HYBRID)
    assert first.returncode == 0, first.stderr
    born = [e for e in events_of(first.stdout) if e["type"] == "cluster.born"]
    assert born and all(not t.startswith("\x00") for e in born for t, _ in e["top_terms"])
    info = state_show(st)
    assert info["docs"] == 3000 and info["mass"] == pytest.approx(3000)
    assert info["fingerprint"]["encoder"] == "wordllama/l2_supercat@256"
    again = noveld("run", "--input", str(stream), "--state-dir", str(st), *HYBRID)
    assert again.returncode == 0 and again.stdout == ""
    # another dimension of the encoder, or the words' own vectors: refused, by name
    other = noveld(
        "run", "--input", str(stream), "--state-dir", str(st), *HYBRID, "--encoder-dim", "128"
    )
    assert other.returncode == 2 and "encoder" in other.stderr, other.stderr
    assert "Traceback" not in other.stderr
    words = noveld(
        "run", "--input", str(stream), "--state-dir", str(st), "--likelihood", "hybrid",
        "--embedding-dim", "256",
    )  # fmt: skip
    assert words.returncode == 2 and "featurizer" in words.stderr, words.stderr


def test_settings_errors_are_one_line() -> None:
    out = noveld("run", "--input", "-", "--model", "svi", "--featurizer", "hybrid", input_text="")
    assert out.returncode == 2 and "natural-gradient" in out.stderr
    assert "Traceback" not in out.stderr
    out = noveld(
        "run", "--input", "-", "--likelihood", "hybrid", "--featurizer", "words", input_text=""
    )
    assert out.returncode == 2 and "needs vectors" in out.stderr


def test_own_embeddings_of_another_dimension_go_to_the_dlq(tmp_path: Path) -> None:
    lines = [
        json.dumps({"id": "a", "text": "markets fell sharply today"}),
        json.dumps({"id": "b", "text": "markets fell", "embedding": [1.0, 0.0, 0.5]}),
        json.dumps({"id": "c", "text": "markets rose", "embedding": [0.1] * 64}),
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    dlq = tmp_path / "dlq.jsonl"
    out = noveld(
        "run", "--input", str(src), "--state-dir", str(tmp_path / "st"), "--dlq", str(dlq),
        *HYBRID, "--encoder-dim", "64",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    dead = [json.loads(x) for x in dlq.read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["wrong_dimension"]
    assert state_show(tmp_path / "st")["docs"] == 2


def test_redis_rebuilds_the_live_hybrid_model_after_every_commit(
    redis_url: str, stream: Path, tmp_path: Path
) -> None:
    """Words and resultants ride in the count store's delta log: a model reloaded from Redis
    (checkpoint + log) has exactly the live model's digest after every commit."""
    client = redis.Redis.from_url(redis_url)
    settings = load_settings(
        None,
        {
            "namespace": "hybrid",
            "dlq": str(tmp_path / "dlq.jsonl"),
            "model": {"likelihood": "hybrid", "featurizer": "hybrid", "half_life_docs": 1500.0},
        },
    )
    code, compared, _ = rebuilt_after_every_commit(client, settings, stream, checkpoint_every=5)
    assert code == 0 and len(compared) >= 10 and all(compared)


@pytest.mark.faults
@pytest.mark.slow
def test_sigkill_chaos_loses_nothing_and_counts_nothing_twice(
    long_stream: Path, tmp_path: Path
) -> None:
    """SIGKILLs after snapshots, then a resume, give the clean run's state hash and the same
    birth events."""
    info = assert_kills_match_a_clean_run(
        long_stream, tmp_path, LONG, extra=tuple(HYBRID), pause=(0.0, 0.3), seed=3
    )
    assert info["mass"] == pytest.approx(LONG)


# just under the measured values on this stream: NMI 0.987, novelty precision 0.967 and recall
# 0.90 (27 of its 30 stories; words alone: NMI 0.983); the vectors alone, 0.611 (the generated
# words are made up, so the encoder knows them as fragments, but they still carry the stories)
NMI_FLOOR = 0.98
PRECISION_FLOOR = 0.94
RECALL_FLOOR = 0.88
SEMANTIC_NMI_FLOOR = 0.58
