"""The web view's feeds: a stored state gives the same stories and top terms as the pipeline
that wrote it (hdp's topics spread over their words as its events do), births come from the
pipeline's committed ``cluster.born`` events, and the throughput and cache behave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from noveld.daemon.embedded import run_file
from noveld.daemon.errors import UserError
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import Settings, UiSettings, load_settings
from noveld.daemon.sinks import CollectingEvents
from noveld.daemon.web.feed import Cached, StoryIndex, TermsMemo, Throughput, stories_of
from noveld.daemon.web.live_feed import PipelineFeed
from noveld.daemon.web.start import view_token
from noveld.daemon.web.state_feed import state_dir_feed
from noveld.daemon.web.terms import StoredTerms
from noveld.models.hdp import live_clusters
from noveld.models.suffstats import MultinomialStats

STORIES = [
    "volcano eruption ash cloud flights grounded",
    "election ballot count vote recount",
    "football final penalty shootout cup",
    "harbour dockers strike wages pickets",
]


def write_stream(path: Path, n: int) -> Path:
    rows = [
        {"id": f"d{i}", "text": STORIES[i % 4] + f" extra{i % 7}", "ts": 1_700_000_000 + 60 * i}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def run_pipeline(tmp_path: Path, model: dict[str, Any]) -> tuple[Pipeline, list[dict[str, Any]]]:
    settings: Settings = load_settings(
        None,
        {"dlq": str(tmp_path / "dlq.jsonl"), "model": model, "state": {"dir": str(tmp_path)}},
    )
    sink = CollectingEvents()
    code, _, pipeline = run_file(settings, str(write_stream(tmp_path / "in.jsonl", 120)),
                                 events_sink=sink)  # fmt: skip
    assert code == 0
    return pipeline, sink.events


@pytest.mark.parametrize("model", [{"kind": "dpmm"}, {"kind": "hdp"}])
def test_a_stored_state_shows_what_the_pipeline_shows(
    tmp_path: Path, model: dict[str, Any]
) -> None:
    pipeline, events = run_pipeline(tmp_path, model)
    live = PipelineFeed(pipeline)
    stored = state_dir_feed(tmp_path, "default")
    mine, theirs = live.stories(10), stored.stories(10)
    assert mine and [s["uid"] for s in mine] == [s["uid"] for s in theirs]
    assert [s["size"] for s in mine] == [s["size"] for s in theirs]
    for a, b in zip(mine, theirs, strict=True):  # the events' top terms, from the model or not
        assert [t for t, _ in a["top_terms"]] == [t for t, _ in b["top_terms"]], a["uid"]
        assert [w for _, w in a["top_terms"]] == pytest.approx([w for _, w in b["top_terms"]])
        assert not any(t.startswith("\x00") for t, _ in b["top_terms"])
    assert all(w[0] in " ".join(STORIES) for s in mine for w in s["top_terms"][:3])
    born = [e for e in events if e["type"] == "cluster.born"]
    assert born
    births = live.births(50)
    assert [b["uid"] for b in births][: len(born)] == [e["cluster_id"] for e in reversed(born)]
    first = births[len(born) - 1]  # the oldest of the events
    assert first["founding_doc_id"] == born[0]["founding_doc_id"]
    assert first["born_at"] == born[0]["born_at"]["ts"] and first["noticed_at"] is not None
    # the snapshot names its announced stories, by the births their summaries record
    stored_births = stored.births(50)
    assert {b["uid"] for b in stored_births} == {f"c{u}" for u in pipeline.announced}
    assert all(b["born_at"] is not None and b["live"] for b in stored_births)
    born_at = [b["born_at"] for b in stored_births]
    assert born_at == sorted(born_at, reverse=True)
    assert all(len(b["sparkline"]) == 24 and b["recent"] is not None for b in stored_births)
    status = stored.status()
    assert status["docs"] == 120 and status["source"] == "state-dir"
    assert status["model"] == model["kind"] and status["clusters"] == live.status()["clusters"]
    assert status["likelihood"] == live.status()["likelihood"] == "hybrid"  # both's default


def test_stories_carry_their_summaries(tmp_path: Path) -> None:
    pipeline, _ = run_pipeline(tmp_path, {"kind": "dpmm"})
    live, stored = PipelineFeed(pipeline), state_dir_feed(tmp_path, "default")
    mine = live.stories(10)
    assert mine == stored.stories(10)  # the snapshot holds the same summaries
    texts = {f"d{i}": STORIES[i % 4] + f" extra{i % 7}" for i in range(120)}
    for s in mine:
        # 120 documents a minute apart: three hourly buckets, ending at the stream's newest
        assert len(s["sparkline"]) == 24 and sum(s["sparkline"]) == round(s["size"])
        assert s["sparkline"][:21] == [0] * 21 and s["recent"] == round(s["size"])
        assert s["born_at"] <= s["last_seen"] and s["born_at"].startswith("2023-11-14T")
        assert s["exemplars"] and all(e["text"] == texts[e["id"]] for e in s["exemplars"])
    grown = [b["recent"] for b in live.births(50) if b["live"]]
    assert grown and all(r > 0 for r in grown)
    assert live.status()["recent_window_s"] == 3 * 3600


def test_stories_are_the_largest_first(tmp_path: Path) -> None:
    pipeline, _ = run_pipeline(tmp_path, {"kind": "dpmm"})
    stats = pipeline.state.stats
    index = StoryIndex(stats, pipeline.top_terms)
    all_ = stories_of(index, pipeline.state, {}, 1000)
    sizes = [s["size"] for s in all_]
    assert sizes == sorted(sizes, reverse=True) and len(all_) == live_clusters(stats)
    assert stories_of(index, pipeline.state, {}, 2) == all_[:2]


def test_top_terms_are_computed_again_only_for_stories_that_changed(tmp_path: Path) -> None:
    pipeline, _ = run_pipeline(tmp_path, {"kind": "dpmm"})
    calls: list[int] = []

    def terms(uid: int, n: int) -> list[tuple[str, float]]:
        calls.append(uid)
        return pipeline.top_terms(uid, n)

    memo = TermsMemo(size=100)
    first = stories_of(StoryIndex(pipeline.state.stats, terms, memo), pipeline.state, {}, 3)
    assert len(calls) == 3
    assert stories_of(StoryIndex(pipeline.state.stats, terms, memo), pipeline.state, {}, 3) == first
    assert len(calls) == 3  # nothing changed: nothing computed
    stats = pipeline.state.stats
    top = stats.slot_of(int(first[0]["uid"][1:]))
    stats.ntok[top] += 1.0  # the largest story took a document
    stories_of(StoryIndex(stats, terms, memo), pipeline.state, {}, 3)
    assert calls == [*calls[:3], int(first[0]["uid"][1:])]


def test_throughput_is_the_rate_over_the_window() -> None:
    now = [0.0]
    t = Throughput(window_s=10, clock=lambda: now[0])
    assert t.add(0) is None
    now[0] = 2
    assert t.add(100) == 50
    now[0] = 20  # the window moved past the first sample: the rate of the last stretch
    assert t.add(1000) == pytest.approx((1000 - 100) / 18)
    now[0] = 21
    assert t.add(10) is None  # fewer documents: another namespace, start again


def test_answers_are_kept_for_the_ttl() -> None:
    class Counting:
        calls = 0

        def stories(self, limit: int) -> list[dict[str, Any]]:
            self.calls += 1
            return [{"n": self.calls}]

        def births(self, limit: int) -> list[dict[str, Any]]:
            return []

        def status(self) -> dict[str, Any]:
            return {}

    feed = Counting()
    cached = Cached(feed, ttl_s=60)
    assert cached.stories(5) == cached.stories(5) == [{"n": 1}]
    assert cached.stories(6) == [{"n": 2}]  # another question
    assert Cached(feed, ttl_s=0).stories(5) == [{"n": 3}]


def test_the_token_comes_from_the_settings_or_its_file(tmp_path: Path) -> None:
    assert view_token(UiSettings()) is None
    assert view_token(UiSettings(token="abc")) == "abc"  # type: ignore[arg-type]
    f = tmp_path / "t"
    f.write_text("xyz \nignored\n")
    assert view_token(UiSettings(token_file=f)) == "xyz"
    f.write_text("\n")
    with pytest.raises(UserError, match="empty"):
        view_token(UiSettings(token_file=f))
    with pytest.raises(UserError, match="cannot read"):
        view_token(UiSettings(token_file=tmp_path / "missing"))
    with pytest.raises(ValidationError, match="not both"):
        UiSettings(token="a", token_file=f)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="empty"):
        UiSettings(token=" ")  # type: ignore[arg-type]


def test_stored_terms_leave_out_reserved_entries() -> None:
    words = (np.array([0, 1, 2]), np.array([3.0, 2.0, 1.0]))
    stats = MultinomialStats.from_clusters([7], [2.0], [6.0], [words], 1.0, 8, 2, 3)
    terms = StoredTerms(stats, ["\x00ctx/src\x1fa", "quake", "tsunami"])
    assert terms(7, 5) == [("quake", round(2 / 3, 6)), ("tsunami", round(1 / 3, 6))]
    assert terms(7, 1) == [("quake", round(2 / 3, 6))] and terms(8, 5) == []


def test_a_state_that_cannot_be_read_answers_503_with_the_reason(tmp_path: Path) -> None:
    import urllib.error
    import urllib.request

    from noveld.daemon.web.server import ViewServer
    from noveld.state.memory import SNAPSHOT_NAME

    feed = state_dir_feed(tmp_path, "default")
    server = ViewServer(feed, "127.0.0.1", 0, None, ttl_s=0).start()
    try:
        with urllib.request.urlopen(server.url + "api/status", timeout=10) as r:
            assert "no snapshot" in json.loads(r.read())["note"]  # before the daemon's first
        (tmp_path / SNAPSHOT_NAME).write_bytes(b"not a snapshot")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(server.url + "api/stories", timeout=10)
        assert err.value.code == 503
        assert SNAPSHOT_NAME in json.loads(err.value.read())["error"]
    finally:
        server.stop()
