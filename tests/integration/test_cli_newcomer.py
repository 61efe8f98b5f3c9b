"""What a newcomer trips over first: the demo refuses flags that describe an input it does not
read, and evaluate's JSON report gives counts as integers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_runner import noveld


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--id-field", "guid"], "--id-field"),
        (["--text-field", "body", "--label-field", "topic"], "--text-field, --label-field"),
        (["--max-doc-bytes", "10"], "--max-doc-bytes"),
        (["--context-field", "source"], "--context-field"),
    ],
)
def test_demo_refuses_input_flags(flags: list[str], named: str) -> None:
    out = noveld("demo", "--docs", "60", *flags, timeout=120)
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert f"noveld: error: {named} describe" in out.stderr
    assert "noveld demo generates its own stream" in out.stderr
    assert out.stdout == ""  # refused before generating or clustering anything


@pytest.mark.parametrize("top", ["-1", "0"])
def test_demo_refuses_a_top_below_one(top: str) -> None:
    out = noveld("demo", "--docs", "60", "--top", top, timeout=120)
    assert out.returncode == 2
    assert f"--top {top}: the demo lists at least one cluster" in out.stderr


def test_demo_lists_as_many_clusters_as_top_asks() -> None:
    out = noveld("demo", "--docs", "300", "--top", "2", timeout=300)
    assert out.returncode == 0, out.stderr
    table = out.stdout.split("== clusters ==")[1].strip().splitlines()
    rows = [line for line in table[1:] if line.strip().startswith("c")]
    assert len(rows) == 2


def test_evaluate_json_gives_counts_as_integers(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    gen = noveld("generate", "--docs", "300", "--out", str(stream), timeout=120)
    assert gen.returncode == 0, gen.stderr
    out = noveld("evaluate", str(stream), "--json", timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    for key in ("births", "true_clusters", "clusters", "docs"):
        assert type(report[key]) is int, (key, report[key])
    assert report["true_clusters"] >= 1 and report["births"] >= 1
