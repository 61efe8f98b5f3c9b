"""Full-length articles through ``noveld run``: documents longer than ``limits.max_doc_tokens``
are truncated (the default) or dead-lettered (``--oversize dead-letter``), a record longer than
``limits.max_doc_bytes`` is dead-lettered, and each outcome is reported — nothing is dropped."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from cli_runner import noveld

pytestmark = pytest.mark.integration

_MARKETS = ["market", "stocks", "shares", "trading", "investors", "index", "bonds"]
_SPORT = ["football", "match", "goal", "team", "players", "league", "coach"]
LONG_WORDS = 20_000  # > max_doc_tokens (16,384): about 150 KB of text


@pytest.fixture(scope="module")
def articles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 short texts of two topics, three articles of 20,000 words, one 1.3 MB record."""
    rng = random.Random(0)
    lines = [
        {"id": f"s{i}", "text": " ".join(rng.choice(_MARKETS if i % 2 else _SPORT)
                                         for _ in range(12))}
        for i in range(40)
    ]  # fmt: skip
    for j in range(3):
        text = " ".join(rng.choice(_MARKETS) for _ in range(LONG_WORDS))
        lines.insert(10 * j + 5, {"id": f"long{j}", "text": text})
    lines.append({"id": "huge", "text": "word " * 260_000})
    path = tmp_path_factory.mktemp("long") / "articles.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _assigned(stdout: str) -> dict[str, str]:
    """Each assigned document's cluster, by document id."""
    events = [json.loads(line) for line in stdout.splitlines()]
    return {e["doc_id"]: e["cluster_id"] for e in events if e["type"] == "document.assigned"}


def test_long_articles_are_truncated_clustered_and_reported(articles: Path, tmp_path: Path) -> None:
    dlq = tmp_path / "dlq.jsonl"
    out = noveld("run", "--input", str(articles), "--dlq", str(dlq), "--emit-assignments")
    assert out.returncode == 0, out.stderr
    assigned = _assigned(out.stdout)
    assert len(assigned) == 43 and {"long0", "long1", "long2"} <= set(assigned)
    # the truncated articles join the short market texts, not a cluster of their own
    assert assigned["long0"] == assigned["long1"] == assigned["long2"] == assigned["s1"]
    assert "3 documents longer than limits.max_doc_tokens were truncated" in out.stderr
    dead = [json.loads(x) for x in dlq.read_text().splitlines()]
    assert [(d["reason"], d["offset"]) for d in dead] == [("oversize", 43)]
    assert "1000000 bytes" in dead[0]["detail"] and "oversize=1" in out.stderr


def test_long_articles_are_dead_lettered_when_asked(articles: Path, tmp_path: Path) -> None:
    dlq = tmp_path / "dlq.jsonl"
    out = noveld(
        "run", "--input", str(articles), "--dlq", str(dlq), "--emit-assignments",
        "--oversize", "dead-letter", "--max-doc-tokens", "16384",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert len(_assigned(out.stdout)) == 40 and "truncated" not in out.stderr
    dead = [json.loads(x) for x in dlq.read_text().splitlines()]
    assert [(d["reason"], d["offset"]) for d in dead] == [
        ("oversize", 5), ("oversize", 15), ("oversize", 25), ("oversize", 43),
    ]  # fmt: skip
    assert dead[0]["detail"] == "20,000 tokens, more than limits.max_doc_tokens (16,384)"
    assert "oversize=4" in out.stderr
