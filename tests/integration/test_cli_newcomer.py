"""What a newcomer trips over first: the demo refuses flags that describe an input it does not
read, evaluate's JSON report gives counts as integers, messages say what really happened (no
saved state, an incomplete line, a file for a state dir), and flat context fields are read."""

from __future__ import annotations

import json
import os
import pty
import subprocess
from pathlib import Path

import pytest
from cli_runner import NOVELD, noveld, wait_for_output


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


def _flat_stream(path: Path, docs: int = 300) -> Path:
    """A generated labelled stream, its context moved into flat fields (``category``,
    ``source``) as users' records usually carry it."""
    gen = noveld("generate", "--docs", str(docs), "--out", str(path), timeout=120)
    assert gen.returncode == 0, gen.stderr
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    with path.open("w") as fh:
        for i, row in enumerate(rows):
            row["source"] = row.pop("context", {}).get("source", "wire")
            row["category"] = f"Natural/{row['label']}" if i % 2 else None
            fh.write(json.dumps(row) + "\n")
    return path


def test_a_closed_stdout_without_state_does_not_claim_a_saved_state(tmp_path: Path) -> None:
    rows = [json.dumps({"id": f"d{i}", "text": f"story{i // 40} w{i % 7} common"})
            for i in range(4000)]  # fmt: skip
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(rows) + "\n")
    proc = subprocess.Popen(
        [*NOVELD, "run", "--input", str(path), "--emit-assignments", "--batch-size", "50"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # as `| head -1` does
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 1, err
    assert "stdout was closed by its reader" in err
    assert "saved state" not in err
    assert "No state is saved (no --state-dir or --redis-url)" in err


def test_evaluate_says_an_incomplete_last_line_is_not_scored(tmp_path: Path) -> None:
    stream = tmp_path / "s.jsonl"
    gen = noveld("generate", "--docs", "200", "--out", str(stream), timeout=120)
    assert gen.returncode == 0, gen.stderr
    with stream.open("a") as fh:
        fh.write('{"id": "cut", "text": "half a rec')  # a writer stopped mid-line
    out = noveld("evaluate", str(stream), timeout=300)
    assert out.returncode == 0, out.stderr
    assert "next run" not in out.stderr
    assert f"the last line of {stream} has no newline" in out.stderr
    assert "an incomplete line, not scored" in out.stderr


@pytest.mark.parametrize("command", ["run", "fit"])
def test_a_state_dir_that_is_a_file_is_named_so(tmp_path: Path, command: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "text": "b"}\n')
    taken = tmp_path / "st"
    taken.write_text("not a directory")
    given = ["--input", str(src)] if command == "run" else [str(src)]
    out = noveld(command, *given, "--state-dir", str(taken), timeout=120)
    assert out.returncode == 2
    assert "Errno" not in out.stderr
    assert f"--state-dir {taken} is not a directory" in out.stderr
    assert taken.read_text() == "not a directory"


@pytest.mark.parametrize("kind", ["missing", "a directory"])
def test_a_refused_input_leaves_no_state_dir(tmp_path: Path, kind: str) -> None:
    src = tmp_path / "in.jsonl"
    if kind == "a directory":
        src.mkdir()  # unreadable as a file (permission bits do not stop root)
    st = tmp_path / "deep" / "st"
    out = noveld("run", "--input", str(src), "--state-dir", str(st), timeout=120)
    assert out.returncode == 2, out.stderr
    assert f"cannot read input {src}" in out.stderr
    assert not (tmp_path / "deep").exists()  # nor the parent it created for it


def test_a_refused_input_keeps_a_state_dir_that_was_there(tmp_path: Path) -> None:
    st = tmp_path / "st"
    st.mkdir()
    out = noveld("run", "--input", str(tmp_path / "none.jsonl"), "--state-dir", str(st))
    assert out.returncode == 2, out.stderr
    assert st.is_dir()  # the user's directory: not removed


def test_run_on_a_terminal_says_it_reads_stdin() -> None:
    main, secondary = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*NOVELD, "run"], stdin=secondary, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        os.close(secondary)
        assert proc.stderr is not None
        said = wait_for_output(proc.stderr, "or give --input FILE", timeout=120)
        assert "reading JSONL documents from stdin" in said and "Ctrl-D" in said
        os.write(main, b"\x04")  # Ctrl-D at the start of a line: end of input
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    finally:
        os.close(main)


def test_run_from_a_pipe_does_not_say_it_reads_stdin() -> None:
    out = noveld("run", input_text='{"id": "a", "text": "b"}\n', timeout=120)
    assert out.returncode == 0, out.stderr
    assert "reading JSONL documents from stdin" not in out.stderr


def test_flat_context_fields_are_read(tmp_path: Path) -> None:
    stream = _flat_stream(tmp_path / "flat.jsonl")
    flags = ("--context-field", "category", "--context-field", "source")
    out = noveld("evaluate", str(stream), "--json", *flags, timeout=300)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["invalid_records"] == 0 and report["docs"] == 300
    run = noveld("run", "--input", str(stream), "--dlq", str(tmp_path / "dlq.jsonl"),
                 "--context-field", "category", timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert not (tmp_path / "dlq.jsonl").exists() or not (tmp_path / "dlq.jsonl").read_text()


def test_evaluate_names_the_dominant_reason_when_the_breaker_opens(tmp_path: Path) -> None:
    stream = _flat_stream(tmp_path / "flat.jsonl")
    rows = [json.loads(line) for line in stream.read_text().splitlines()]
    with stream.open("w") as fh:
        for row in rows:
            row["category"] = [row["category"]]  # a list: no context field
            fh.write(json.dumps(row) + "\n")
    for json_flag in ((), ("--json",)):
        out = noveld("evaluate", str(stream), "--context-field", "category", *json_flag,
                     "--max-consecutive-invalid", "20", timeout=300)  # fmt: skip
        assert out.returncode == 3, out.stderr
        assert "circuit breaker" in out.stderr
        assert "are bad_field" in out.stderr, out.stderr
        assert "'category' must be an object (of context fields) or a string" in out.stderr
