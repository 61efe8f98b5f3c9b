"""Known labels are clusters whose uid is a 40-bit hash of the label: two labels with the same
hash would silently be one category under one of the two names. The second is dead-lettered
with a message naming both, in the batch where it first comes and after a restart alike."""

from __future__ import annotations

import json
from pathlib import Path

from cli_runner import noveld

from noveld.daemon.pipeline import label_uid

FIRST, SECOND = "topic-474592", "topic-940619"  # found by a search over label_uid


def docs(label: str, start: int, n: int) -> str:
    words = "alpha beta gamma" if label == FIRST else "delta epsilon zeta"
    return "".join(
        json.dumps({"id": f"d{i}", "text": f"{words} {i % 3}", "label": label}) + "\n"
        for i in range(start, start + n)
    )


def test_a_label_whose_id_collides_with_a_known_one_is_dead_lettered(tmp_path: Path) -> None:
    assert label_uid(FIRST) == label_uid(SECOND)
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    one.write_text(docs(FIRST, 0, 5) + docs(SECOND, 5, 3))  # both new in one batch
    two.write_text(docs(SECOND, 100, 2))  # the known label comes from the state
    for path, rejected in ((one, 3), (two, 2)):
        dlq = tmp_path / f"{path.stem}.dlq.jsonl"
        out = noveld("run", "--input", str(path), "--state-dir", str(tmp_path / "st"),
                     "--use-labels", "--emit-assignments", "--dlq", str(dlq))  # fmt: skip
        assert out.returncode == 0, out.stderr
        dead = [json.loads(line) for line in dlq.read_text().splitlines()]
        assert len(dead) == rejected and {d["reason"] for d in dead} == {"bad_field"}
        assert all(FIRST in d["detail"] and SECOND in d["detail"] for d in dead), dead
        seated = [json.loads(e) for e in out.stdout.splitlines()]
        assigned = [e for e in seated if e["type"] == "document.assigned"]
        assert len(assigned) == (5 if path == one else 0)
        assert all(e.get("label", FIRST) == FIRST for e in assigned)
