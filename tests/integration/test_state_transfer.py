"""`noveld state export/import` through the CLI: Redis → file → Redis and state dir → Redis keep
the model (same digest), refuse occupied targets and unreadable files with a clear message."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from cli_runner import NOVELD

from noveld.synth import SynthConfig, write_jsonl

pytestmark = pytest.mark.integration


def cli(*args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([*NOVELD, *args], capture_output=True, text=True, timeout=120)
    if ok:
        assert proc.returncode == 0, proc.stderr
    return proc


def show(*target: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(cli("state", "show", *target, "--json").stdout)
    return out


@pytest.fixture(scope="module")
def stream(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("data") / "s.jsonl"
    write_jsonl(SynthConfig(n_docs=1500, n_stories=10, seed=7), path)
    return path


def test_redis_export_import_round_trip(redis_url: str, stream: Path, tmp_path: Path) -> None:
    src = ["--redis-url", redis_url, "--namespace", "exp-src"]
    cli("run", "--input", str(stream), *src, "--quiet", "--dlq", str(tmp_path / "d.jsonl"))
    before = show(*src)
    backup = tmp_path / "backup.npz"
    cli("state", "export", str(backup), *src)
    dst = ["--redis-url", redis_url, "--namespace", "exp-dst"]
    cli("state", "import", str(backup), *dst)
    after = show(*dst)
    for key in ("digest", "docs", "active_clusters", "vocab", "offsets", "fingerprint"):
        assert after[key] == before[key], key
    # the imported namespace is live: the same input resumes after its offsets (nothing new)
    run = cli("run", "--input", str(stream), *dst, "--dlq", str(tmp_path / "d2.jsonl"))
    assert show(*dst)["docs"] == before["docs"]
    assert run.stdout == ""  # no events: nothing was reprocessed

    again = cli("state", "import", str(backup), *dst, ok=False)
    assert again.returncode == 2 and "already holds state" in again.stderr
    assert "Traceback" not in again.stderr
    exists = cli("state", "export", str(backup), *src, ok=False)
    assert exists.returncode == 2 and "--force" in exists.stderr


def test_state_dir_export_seeds_redis(redis_url: str, stream: Path, tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    cli("run", "--input", str(stream), "--state-dir", str(state_dir), "--quiet")
    before = show("--state-dir", str(state_dir))
    backup = tmp_path / "b.npz"
    cli("state", "export", str(backup), "--state-dir", str(state_dir))
    dst = ["--redis-url", redis_url, "--namespace", "from-dir"]
    cli("state", "import", str(backup), *dst)
    after = show(*dst)
    assert after["digest"] == before["digest"] and after["docs"] == before["docs"]
    fresh_dir = tmp_path / "copy"
    cli("state", "import", str(backup), "--state-dir", str(fresh_dir))
    assert show("--state-dir", str(fresh_dir))["digest"] == before["digest"]


def test_export_writes_only_to_a_file_path(stream: Path, tmp_path: Path) -> None:
    """--force replaces a file, never a device or a link (the copy is renamed over the
    target), and a missing directory is named instead of created."""
    state_dir = tmp_path / "state"
    cli("run", "--input", str(stream), "--state-dir", str(state_dir), "--quiet")
    src = ["--state-dir", str(state_dir)]
    link = tmp_path / "link.npz"
    link.symlink_to(tmp_path / "elsewhere.npz")
    for target, said in (
        ("/dev/null", "is not a regular file"),
        (str(link), "is not a regular file"),
        (str(tmp_path), "is not a regular file"),
        (str(tmp_path / "missing" / "b.npz"), "does not exist"),
    ):
        out = cli("state", "export", target, *src, "--force", ok=False)
        assert out.returncode == 2 and said in out.stderr, (target, out.stderr)
    assert Path("/dev/null").is_char_device() and link.is_symlink()
    assert not (tmp_path / "missing").exists()
    again = tmp_path / "b.npz"
    cli("state", "export", str(again), *src)
    cli("state", "export", str(again), *src, "--force")  # a file: replaced


def test_unreadable_export_is_a_clear_error(redis_url: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an export")
    proc = cli("state", "import", str(bad), "--redis-url", redis_url, "--namespace", "x", ok=False)
    assert proc.returncode == 2 and "cannot read snapshot" in proc.stderr
    assert "Traceback" not in proc.stderr
    both = cli("state", "export", str(tmp_path / "o.npz"), ok=False)
    assert both.returncode == 2 and "exactly one of" in both.stderr


def test_set_offset_replaces_a_stored_offset_and_refuses_what_it_cannot_set(
    redis_url: str, stream: Path, tmp_path: Path
) -> None:
    """``state set-offset`` moves one partition's stored offset (a file run's partition is
    ``path:0``, a Kafka one's ``topic:partition``) and says what that means; an unknown partition,
    an empty namespace, a negative offset and an unreachable Redis are one-line refusals that
    write nothing."""
    ns = ["--redis-url", redis_url, "--namespace", "setoff"]
    cli("run", "--input", str(stream), *ns, "--quiet", "--dlq", str(tmp_path / "d.jsonl"))
    key = f"{stream}:0"  # a file is one partition
    assert show(*ns)["offsets"] == {key: 1500}

    back = cli("state", "set-offset", key, "1000", *ns)
    assert f"{key}: stored offset 1500 → 1000" in back.stderr
    assert "records 1000–1499 will be read (again" in back.stderr
    assert show(*ns)["offsets"] == {key: 1000}
    ahead = cli("state", "set-offset", key, "1200", *ns)
    assert "records 1000–1199 will not be read" in ahead.stderr

    refusals = {
        "docs:0": (["docs:0", "5", *ns], f"no stored offset for 'docs:0' (it has: {key})"),
        "empty": (
            [key, "5", "--redis-url", redis_url, "--namespace", "nothing-here"],
            "namespace 'nothing-here' has no state in Redis",
        ),
        "negative": ([key, "-1", *ns], "the offset must be >= 0, got -1"),
        "unreachable": (
            [key, "5", "--redis-url", "redis://127.0.0.1:1/0", "--namespace", "setoff"],
            "cannot reach Redis",
        ),
    }
    for name, (args, said) in refusals.items():
        out = cli("state", "set-offset", *args, ok=False)
        assert out.returncode == 2 and said in out.stderr, (name, out.stderr)
        assert "Traceback" not in out.stderr, name
    assert show(*ns)["offsets"] == {key: 1200}


def test_export_while_a_writer_commits_is_one_instant(redis_url: str, tmp_path: Path) -> None:
    """``state export`` from Redis needs no stop: the state, its undelivered events and uid
    counters are read in one transaction, so no event of a later commit (confirmed past the
    exported offsets) and no counter out of step slips into the copy. Events are held in the
    outbox here (replicas_to_ack 1 without a replica), so every copy carries many."""
    import redis

    from noveld.models.kernels import multinomial as kern
    from noveld.state.redis.store import RedisStore

    path = tmp_path / "live.jsonl"
    write_jsonl(SynthConfig(n_docs=20_000, n_stories=200, seed=9), path)
    key = f"{path}:0"
    writer = subprocess.Popen(
        [*NOVELD, "run", "--input", str(path), "--redis-url", redis_url, "--namespace", "live",
         "--redis-replicas-to-ack", "1", "--batch-size", "50", "--quiet",
         "--dlq", str(tmp_path / "d.jsonl")],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    store = RedisStore(redis.Redis.from_url(redis_url), "live")
    copies = []
    while writer.poll() is None:
        exported = store.export()
        if exported is not None:
            copies.append(exported)
    assert writer.wait() == 0, writer.stderr.read() if writer.stderr else ""
    during = [c for c in copies if 0 < c[0].offsets.get(key, 0) < 20_000]
    assert len(during) >= 5, len(during)  # copies taken mid-run
    assert any(outbox for _, outbox, _ in during)
    for state, outbox, uidnext in during:
        at = state.offsets[key]
        assert state.counters["docs"] == at
        assert all(ev["confirmed_at"]["offset"] < at for ev in outbox), at
        alive = state.stats.uid[state.stats.active_slots()]
        assert int(alive.max()) < uidnext["0"]  # the uid counter covers every live cluster
        assert int(state.stats.ictl[kern.NEXT_UID]) <= uidnext["0"]


def test_a_replaced_input_file_is_refused_with_redis_state_too(
    redis_url: str, stream: Path, tmp_path: Path
) -> None:
    """The checksum of a file's committed lines travels with the namespace's novelty state:
    a run on Redis refuses a replaced file like a state dir does, and after `state set-offset
    PATH:0 0` reads the new one from its start."""
    ns = ["--redis-url", redis_url, "--namespace", "rotated", "--dlq", str(tmp_path / "d.jsonl")]
    lines = stream.read_text().splitlines(keepends=True)
    src = tmp_path / "feed.jsonl"
    src.write_text("".join(lines[:500]))
    cli("run", "--input", str(src), *ns, "--quiet")
    src.write_text("".join(lines[500:1500]))  # rotated: a new, longer file
    refused = cli("run", "--input", str(src), *ns, "--quiet", ok=False)
    assert refused.returncode == 2, refused.stderr
    assert "the first 500 lines of" in refused.stderr and "replaced" in refused.stderr
    cli("state", "set-offset", f"{src}:0", "0", *ns[:4])
    cli("run", "--input", str(src), *ns, "--quiet")
    info = show(*ns[:4])
    assert info["docs"] == 1500 and info["offsets"] == {f"{src}:0": 1000}


def test_state_commands_read_the_namespace_and_target_from_the_environment(
    redis_url: str, stream: Path, tmp_path: Path
) -> None:
    """In a deployment's container the daemon's Redis and namespace come from NOVELD_*
    variables; ``state show`` and ``state export`` there used namespace 'default' (and
    without --redis-url found no target at all)."""
    ns = f"env-{tmp_path.name[-12:]}".replace("_", "-")
    cli("run", "--input", str(stream), "--redis-url", redis_url, "--namespace", ns, "--quiet",
        "--dlq", str(tmp_path / "d.jsonl"))  # fmt: skip
    expected = show("--redis-url", redis_url, "--namespace", ns)
    env = {**os.environ, "NOVELD_REDIS__URL": redis_url, "NOVELD_NAMESPACE": ns}

    def with_env(*args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([*NOVELD, *args], capture_output=True, text=True, env=env,
                              timeout=120)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc

    assert json.loads(with_env("state", "show", "--json").stdout)["digest"] == expected["digest"]
    shown = json.loads(with_env("state", "show", "--redis-url", redis_url, "--json").stdout)
    assert shown["digest"] == expected["digest"]  # --redis-url given, namespace from the env
    backup = tmp_path / "b.npz"
    with_env("state", "export", str(backup))
    state_dir = tmp_path / "sd"
    state_dir.mkdir()
    with_env("state", "import", str(backup), "--state-dir", str(state_dir))  # the flag wins
    assert show("--state-dir", str(state_dir))["digest"] == expected["digest"]
