"""Checks several Redis test modules make of a pipeline's commits: what each returned, and
the model rebuilt from Redis after every one of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from noveld.daemon.embedded import run_file
from noveld.daemon.pipeline import Pipeline
from noveld.daemon.settings import Settings, model_fingerprint
from noveld.daemon.sinks import CollectingEvents
from noveld.state.base import CommitRequest, CommitResult, NamespaceState, state_digest
from noveld.state.redis.keys import CHECKPOINT_EVERY
from noveld.state.redis.store import RedisStore


def same_digest(loaded: NamespaceState, live: NamespaceState) -> bool:
    """Exactly the same model, vocabulary and offsets."""
    return state_digest(loaded) == state_digest(live)


def recorded_commits(store: RedisStore) -> list[CommitResult]:
    """What each of ``store``'s commits from now on returned (a pipeline's commits, read after
    its step)."""
    results: list[CommitResult] = []
    commit = store.commit

    def recording(state: NamespaceState, request: CommitRequest) -> CommitResult:
        results.append(commit(state, request))
        return results[-1]

    store.commit = recording  # type: ignore[method-assign]
    return results


def rebuilt_after_every_commit(
    client: redis.Redis,
    settings: Settings,
    source: Path,
    same: Callable[[NamespaceState, NamespaceState], bool] = same_digest,
    checkpoint_every: int = CHECKPOINT_EVERY,
) -> tuple[int, list[bool], list[dict[str, Any]]]:
    """Run ``source`` into the settings' Redis namespace and, after every commit, reload the
    model from Redis (checkpoint + delta log) and compare it with the live one. Returns the
    exit code, one comparison per commit and the delivered events."""
    pipes: list[Pipeline] = []
    compared: list[bool] = []
    namespace = settings.namespace

    class CheckingStore(RedisStore):
        def commit(self, state: NamespaceState, request: CommitRequest) -> CommitResult:
            outcome = super().commit(state, request)
            pipes[0]._sync_state()
            loaded = RedisStore(client, namespace).load(model_fingerprint(settings))
            assert loaded is not None
            compared.append(same(loaded, pipes[0].state))
            return outcome

    sink = CollectingEvents()
    code, _, _ = run_file(
        settings, str(source), events_sink=sink,
        store=CheckingStore(client, namespace, checkpoint_every=checkpoint_every),
        snapshot=False, on_start=pipes.append,
    )  # fmt: skip
    return code, compared, sink.events
