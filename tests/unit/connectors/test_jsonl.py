"""Tests of noveld.connectors.jsonl: file/stdin source with resume, JSON-lines sink, file DLQ."""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path

import pytest

from noveld.connectors import jsonl
from noveld.connectors.decode import DecodeLimits, FieldNames, Invalid, decode_record
from noveld.connectors.file_sinks import DlqFileSink, JsonLinesSink
from noveld.connectors.jsonl import JsonlSource, Record
from noveld.schema import InvalidReason, SourcePosition

# line numbers:   0          1    2           3       4             5 (no trailing newline)
CONTENT = b'{"id":"a"}\n\n{"id":"b"}\r\n   \t\n{"id":"c"}\n{"id":"d"}'


@pytest.fixture
def data_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_bytes(CONTENT)
    return path


def _offsets(records: list[Record]) -> list[int]:
    return [r.position.offset for r in records]


def test_reads_records_with_positions(data_file: Path) -> None:
    with JsonlSource(str(data_file)) as src:
        records = list(src)
        assert src.exhausted
        assert src.next_offset == 6
    assert [r.raw for r in records] == [b'{"id":"a"}', b'{"id":"b"}', b'{"id":"c"}', b'{"id":"d"}']
    assert _offsets(records) == [0, 2, 4, 5]  # blank lines count but yield nothing
    assert records[0].position == SourcePosition(topic=str(data_file), partition=0, offset=0)


def test_read_batch_sizes_and_exhaustion(data_file: Path) -> None:
    src = JsonlSource(str(data_file))
    first = src.read_batch(2)
    assert _offsets(first) == [0, 2]
    assert not src.exhausted
    assert src.next_offset == 3
    second = src.read_batch(10)
    assert _offsets(second) == [4, 5]
    assert src.exhausted
    assert src.read_batch(10) == []
    src.close()


@pytest.mark.parametrize(
    ("start", "expected"),
    [(0, [0, 2, 4, 5]), (1, [2, 4, 5]), (2, [2, 4, 5]), (3, [4, 5]), (5, [5]), (6, []), (99, [])],
)
def test_start_offset_resumes(data_file: Path, start: int, expected: list[int]) -> None:
    with JsonlSource(str(data_file), start_offset=start) as src:
        assert _offsets(list(src)) == expected
        assert src.exhausted


def test_resume_at_next_offset_loses_and_repeats_nothing(tmp_path: Path) -> None:
    path = tmp_path / "many.jsonl"
    lines = [b"" if i % 7 == 3 else b'{"id":"%d"}' % i for i in range(100)]
    path.write_bytes(b"\n".join(lines) + b"\n")
    seen: list[int] = []
    start = 0
    while True:
        src = JsonlSource(str(path), start_offset=start)
        batch = src.read_batch(9)
        seen.extend(_offsets(batch))
        start = src.next_offset
        done = src.exhausted
        src.close()
        if done:
            break
    assert seen == [i for i in range(100) if i % 7 != 3]


def test_bad_arguments_rejected(data_file: Path) -> None:
    with pytest.raises(ValueError):
        JsonlSource(str(data_file), start_offset=-1)
    with JsonlSource(str(data_file)) as src, pytest.raises(ValueError):
        src.read_batch(0)


def test_missing_file_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        JsonlSource(str(tmp_path / "absent.jsonl"))


def test_max_line_bytes_cuts_long_lines(tmp_path: Path) -> None:
    path = tmp_path / "long.jsonl"
    path.write_bytes(b"x" * 100 + b"\n" + b'{"id":"ok"}\n' + b"y" * 11 + b"\r\n" + b"z" * 50)
    with JsonlSource(str(path), max_line_bytes=10) as src:
        records = list(src)
        assert src.held_tail  # the over-long last line may still be being written: left
    assert _offsets(records) == [0, 1, 2]
    assert records[0].raw == b"x" * 11  # limit + 1: the decoder reports oversize
    assert records[1].raw == b'{"id":"ok"}'
    assert records[2].raw == b"y" * 11
    with path.open("ab") as f:
        f.write(b"\n")
    with JsonlSource(str(path), start_offset=3, max_line_bytes=10) as src:
        assert [r.raw for r in src] == [b"z" * 11]
    out = decode_record(records[0].raw, FieldNames(), DecodeLimits(max_doc_bytes=10))
    assert isinstance(out, Invalid) and out.reason == InvalidReason.OVERSIZE


def test_unfinished_last_line_of_a_file_is_left_for_the_next_run(tmp_path: Path) -> None:
    """A writer appending to the file may not have finished its last line: without a newline
    and not JSON, it is not read (not dead-lettered for good); once completed, a run resuming
    at the same offset reads it."""
    path = tmp_path / "growing.jsonl"
    path.write_bytes(b'{"id":"a"}\n{"id":"b","te')
    with JsonlSource(str(path)) as src:
        assert [r.raw for r in src] == [b'{"id":"a"}']
        assert src.held_tail and src.exhausted and src.next_offset == 1
    with open(path, "ab") as fh:
        fh.write(b'xt":"x"}\n')
    with JsonlSource(str(path), start_offset=1) as src:
        assert [r.raw for r in src] == [b'{"id":"b","text":"x"}']
        assert not src.held_tail


def test_a_file_with_carriage_returns_alone_is_told_apart(tmp_path: Path) -> None:
    """Lines ending in CR alone are one unfinished line here: the run says so (its notice
    names the carriage returns) instead of only suggesting a writer is still appending."""
    path = tmp_path / "mac.jsonl"
    path.write_bytes(b'{"id":"a","text":"x"}\r{"id":"b","text":"y"}\r')
    with JsonlSource(str(path)) as src:
        assert list(src) == []
        assert src.held_tail and src.held_tail_cr
    path.write_bytes(b'{"id":"b","te')
    with JsonlSource(str(path)) as src:
        assert list(src) == [] and src.held_tail and not src.held_tail_cr


def test_complete_last_line_without_newline_is_read(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"id":"a"}\n{"id":"b"}')  # many writers omit the final newline
    with JsonlSource(str(path)) as src:
        assert [r.raw for r in src] == [b'{"id":"a"}', b'{"id":"b"}']
        assert not src.held_tail and src.next_offset == 2


def test_raw_bytes_are_not_decoded(tmp_path: Path) -> None:
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b"\xff\xfe garbage\n")
    with JsonlSource(str(path)) as src:
        assert [r.raw for r in src] == [b"\xff\xfe garbage"]


def test_stdin_source(monkeypatch: pytest.MonkeyPatch) -> None:
    read_fd, write_fd = os.pipe()
    os.write(write_fd, b'{"id":"a"}\n\n{"id":"b"}\n')
    os.close(write_fd)
    fake = open(read_fd)  # noqa: SIM115 - stands in for the process's stdin
    monkeypatch.setattr(sys, "stdin", fake)
    src = JsonlSource(jsonl.STDIN, start_offset=1)
    records = list(src)
    src.close()  # closes its own duplicate, leaves stdin open
    assert not fake.closed
    os.fstat(fake.fileno())  # still a valid descriptor
    fake.close()
    assert [r.raw for r in records] == [b'{"id":"b"}']
    assert records[0].position == SourcePosition(topic="-", partition=0, offset=2)


class _CountingStream(io.StringIO):
    flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def test_json_lines_sink_writes_models_and_dicts() -> None:
    stream = _CountingStream()
    sink = JsonLinesSink(stream)
    pos = SourcePosition(topic="t", offset=1)
    sink.write(pos)
    sink.write({"k": "é", "n": [1, 2]})
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0]) == {"topic": "t", "partition": 0, "offset": 1, "ts": None}
    assert json.loads(lines[1]) == {"k": "é", "n": [1, 2]}
    assert stream.flushes == 2  # each line is flushed as written


def test_json_lines_sink_event_round_trip() -> None:
    from noveld.schema import ClusterMerged, merge_event_id, parse_event

    stream = io.StringIO()
    pos = SourcePosition(topic="t", offset=1)
    ev = ClusterMerged(namespace="n", model="dpmm", cluster_id="c1", into="c0", merged_at=pos)
    JsonLinesSink(stream).write(ev)
    back = parse_event(stream.getvalue().strip())
    assert back == ev
    assert back.event_id == merge_event_id("n", "c1", "c0")


def _record(raw: bytes, offset: int, topic: str = "in.jsonl") -> Record:
    return Record(raw, SourcePosition(topic=topic, partition=0, offset=offset))


def test_dlq_file_contents(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "dlq.jsonl"
    with DlqFileSink(path) as dlq:
        assert path.parent.is_dir()  # parents are created up front
        assert not path.exists()  # the file only on the first write
        assert dlq.count == 0
        dlq.write(_record(b"not json", 3), Invalid(InvalidReason.NOT_JSON, "Expecting value"))
        dlq.write(_record(b"caf\xe9 \xff", 9), Invalid(InvalidReason.UNDECODABLE, "bad utf-8"))
        dlq.write(_record('{"t":"é"}'.encode(), 12), Invalid(InvalidReason.NO_CONTENT, "none"))
        assert dlq.count == 3
        dlq.flush()
        lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == [
        {
            "reason": "not_json",
            "detail": "Expecting value",
            "source": "in.jsonl",
            "partition": 0,
            "offset": 3,
            "raw": "not json",
        },
        {
            "reason": "undecodable",
            "detail": "bad utf-8",
            "source": "in.jsonl",
            "partition": 0,
            "offset": 9,
            "raw": "caf\\xe9 \\xff",
        },
        {
            "reason": "no_content",
            "detail": "none",
            "source": "in.jsonl",
            "partition": 0,
            "offset": 12,
            "raw": '{"t":"é"}',
        },
    ]


def test_dlq_appends_and_counts_per_instance(tmp_path: Path) -> None:
    path = tmp_path / "dlq.jsonl"
    with DlqFileSink(path) as dlq:
        dlq.write(_record(b"x", 0), Invalid(InvalidReason.NOT_JSON, "d"))
    with DlqFileSink(path) as dlq:
        dlq.write(_record(b"y", 1), Invalid(InvalidReason.NOT_JSON, "d"))
        assert dlq.count == 1
    raws = [json.loads(line)["raw"] for line in path.read_text().splitlines()]
    assert raws == ["x", "y"]


def test_dlq_cuts_a_torn_last_line_before_appending(tmp_path: Path) -> None:
    """A run that died (or ran out of disk) mid-write left part of a dead letter; the next
    run's first line was appended to it, and both were unreadable JSON."""
    path = tmp_path / "dlq.jsonl"
    with DlqFileSink(path) as dlq:
        dlq.write(_record(b"x", 0), Invalid(InvalidReason.NOT_JSON, "d"))
    with path.open("a") as fh:
        fh.write('{"reason":"not_json","detail":"not JSON: E')  # the torn write
    with DlqFileSink(path) as dlq:
        dlq.write(_record(b"y", 1), Invalid(InvalidReason.NOT_JSON, "d"))
    raws = [json.loads(line)["raw"] for line in path.read_text().splitlines()]
    assert raws == ["x", "y"]
    path.write_text('{"torn')  # nothing complete at all
    with DlqFileSink(path) as dlq:
        dlq.write(_record(b"z", 2), Invalid(InvalidReason.NOT_JSON, "d"))
    assert [json.loads(line)["raw"] for line in path.read_text().splitlines()] == ["z"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_disk_names_the_dead_letter_file() -> None:
    dlq = DlqFileSink(Path("/dev/full"))  # every write: ENOSPC
    with pytest.raises(OSError, match="cannot write dead letters to /dev/full: No space left"):
        dlq.write(_record(b"x", 0), Invalid(InvalidReason.NOT_JSON, "d"))
        dlq.flush()


def test_dlq_flush_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fake_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fake_fsync)
    dlq = DlqFileSink(tmp_path / "dlq.jsonl")
    dlq.write(_record(b"x", 0), Invalid(InvalidReason.NOT_JSON, "d"))
    dlq.flush()
    assert len(synced) == 1
    assert (tmp_path / "dlq.jsonl").read_text().count("\n") == 1  # visible after flush
    dlq.close()
    with pytest.raises(ValueError):
        dlq.write(_record(b"x", 0), Invalid(InvalidReason.NOT_JSON, "d"))


def test_clean_run_leaves_no_dlq_file(tmp_path: Path) -> None:
    dlq = DlqFileSink(tmp_path / "dlq.jsonl")
    dlq.flush()
    dlq.close()
    assert not (tmp_path / "dlq.jsonl").exists()
    assert dlq.count == 0


def test_unwritable_dlq_path_fails_at_construction(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError):
        DlqFileSink(blocker / "dlq.jsonl")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        DlqFileSink(tmp_path)  # fails now, not at the first invalid record


def test_source_decode_dlq_end_to_end(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"id":"a","text":"hi"}\n[1]\n\n{"text":"no id"}\n{"id":"b","text":"ok"}\n')
    dlq_path = tmp_path / "dlq.jsonl"
    ids: list[str] = []
    with JsonlSource(str(path)) as src, DlqFileSink(dlq_path) as dlq:
        for rec in src:
            out = decode_record(rec.raw, FieldNames(), DecodeLimits())
            if isinstance(out, Invalid):
                dlq.write(rec, out)
            else:
                ids.append(out.id)
    assert ids == ["a", "b"]
    dead = [json.loads(line) for line in dlq_path.read_text().splitlines()]
    assert [(d["reason"], d["offset"], d["raw"]) for d in dead] == [
        ("not_object", 1, "[1]"),
        ("missing_id", 3, '{"text":"no id"}'),
    ]


def _checksum_after(path: Path, lines: int, max_line_bytes: int | None = None) -> int:
    with JsonlSource(str(path), start_offset=lines, max_line_bytes=max_line_bytes) as src:
        assert src.next_offset == lines
        return src.checksum


def test_the_checksum_of_a_prefix_survives_appends_newlines_and_crlf(tmp_path: Path) -> None:
    """What a resumed run compares: the first N lines' checksum must not change when the file
    grows, its last line gets its newline, or its line ends change; it must when a line does."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(CONTENT)
    at = {n: _checksum_after(path, n) for n in range(7)}
    assert len(set(at.values())) == 7  # every line, blank ones too, moves it
    path.write_bytes(CONTENT + b'\n{"id":"e"}\n')  # appended; line 5 got its newline
    assert all(_checksum_after(path, n) == at[n] for n in range(7))
    path.write_bytes(CONTENT.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))
    assert all(_checksum_after(path, n) == at[n] for n in range(7))
    path.write_bytes(CONTENT.replace(b'"b"', b'"B"'))
    assert [_checksum_after(path, n) == at[n] for n in range(7)] == [True] * 3 + [False] * 4


def test_checksum_at_answers_for_each_offset_read_since_the_last_asked(data_file: Path) -> None:
    """A commit's next offset may stop short of what was read (the circuit breaker cuts a
    batch): the checksum there is known; offsets before an earlier question are forgotten."""
    with JsonlSource(str(data_file), start_offset=1) as src:
        assert src.checksum_at(1) == _checksum_after(data_file, 1)
        src.read_batch(10)
        expected = {n: _checksum_after(data_file, n) for n in range(1, 7)}
        assert src.checksum_at(3) == expected[3]
        assert src.checksum_at(2) is None  # asked past it already
        assert src.checksum_at(6) == expected[6] == src.checksum
        assert src.checksum_at(7) is None  # not read yet


def test_an_over_long_line_counts_in_full_whatever_the_limit(tmp_path: Path) -> None:
    """A cut line is discarded, not forgotten: its whole content enters the checksum, so a run
    with another ``max_doc_bytes`` agrees."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"id":"a"}\n' + b"x" * 200_000 + b'\n{"id":"b"}\n')
    full = _checksum_after(path, 3)
    assert _checksum_after(path, 3, max_line_bytes=100) == full
    assert _checksum_after(path, 3, max_line_bytes=70_000) == full


def test_a_resume_survives_a_line_completed_after_the_run_read_what_there_was(
    tmp_path: Path,
) -> None:
    """Writers caught mid-line: an over-long last line (held, not cut and consumed) and a
    ``\r\n`` writer caught between the two bytes (its JSON line is read; the ``\r`` is the
    terminator's) — once the line is finished, the checksum of what was read still holds."""
    path = tmp_path / "in.jsonl"
    big = b'{"id":"big","text":"' + b"x " * 600 + b'"}'
    path.write_bytes(b'{"id":"a"}\n' + big[:700])
    with JsonlSource(str(path), max_line_bytes=100) as src:
        assert [r.raw for r in src] == [b'{"id":"a"}'] and src.next_offset == 1
    path.write_bytes(b'{"id":"a"}\n' + big + b'\n{"id":"b"}\r')
    with JsonlSource(str(path), max_line_bytes=100) as src:
        assert _offsets(list(src)) == [0, 1, 2]
        crc = src.checksum
    path.write_bytes(b'{"id":"a"}\n' + big + b'\n{"id":"b"}\r\n{"id":"c"}\n')
    assert _checksum_after(path, 3, max_line_bytes=100) == crc
    assert _checksum_after(path, 3) == crc


def test_a_crlf_split_by_the_line_limit_counts_as_a_terminator(tmp_path: Path) -> None:
    """An over-long line whose ``\r`` is the last byte the limit lets through: its checksum is
    the LF file's, whatever the limit."""
    line = b"q" * 1001
    crlf, lf = tmp_path / "crlf.jsonl", tmp_path / "lf.jsonl"
    crlf.write_bytes(line + b"\r\n" + b'{"id":"a"}\r\n')
    lf.write_bytes(line + b"\n" + b'{"id":"a"}\n')
    want = _checksum_after(lf, 2)
    for limit in (999, 1000, 1001, 5000, None):
        assert _checksum_after(crlf, 2, max_line_bytes=limit) == want, limit
        assert _checksum_after(lf, 2, max_line_bytes=limit) == want, limit


def test_blank_lines_between_records_cost_no_memory(tmp_path: Path) -> None:
    """Checksums are kept where a batch may end — after a record — not for every line."""
    path = tmp_path / "in.jsonl"
    path.write_bytes(b'{"id":"a"}\n' + b"\n" * 100_000 + b'{"id":"b"}\n')
    with JsonlSource(str(path)) as src:
        assert _offsets(src.read_batch(10)) == [0, 100_001]
        assert len(src._crcs) == 2
        assert src.checksum_at(1) is not None and src.checksum_at(100_002) == src.checksum


def test_the_checksums_kept_for_commits_stay_few(tmp_path: Path) -> None:
    """A commit asks for the checksum at the end of the batch just read: those of the lines
    before it are forgotten, so a long file run keeps a batch's worth, not one per line."""
    path = tmp_path / "in.jsonl"
    path.write_text("".join(f'{{"id": "{i}", "text": "t"}}\n' for i in range(1000)))
    with JsonlSource(str(path)) as src:
        while src.read_batch(10):
            assert src.checksum_at(src.next_offset) == src.checksum
        assert len(src._crcs) <= 1
