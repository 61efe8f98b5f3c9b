"""What the pipeline's callers read of it: the live namespace (state, vocabulary, novelty
tracker, …), the breaker's count and the outbox's, delegated to the parts that hold them."""

from __future__ import annotations

from noveld.daemon.stages.decode import Rejections
from noveld.daemon.stages.live import LiveNamespace
from noveld.daemon.stages.outbox import Outbox
from noveld.featurize import Featurizer
from noveld.models.novelty import NoveltyTracker
from noveld.models.vocabulary import Vocabulary
from noveld.state.base import NamespaceState


class LiveReads:
    """The read side of :class:`~noveld.daemon.pipeline.Pipeline`, as the callers, the
    metrics and the tests read it."""

    live: LiveNamespace
    rejects: Rejections
    outbox: Outbox

    # the live namespace, as the callers and tests have always read it
    @property
    def state(self) -> NamespaceState:
        return self.live.state

    @property
    def vocab(self) -> Vocabulary:
        return self.live.vocab

    @property
    def featurizer(self) -> Featurizer:
        return self.live.featurizer

    @property
    def tracker(self) -> NoveltyTracker:
        return self.live.tracker

    @property
    def announced(self) -> set[int]:
        return self.live.announced

    @property
    def known_labels(self) -> dict[int, str]:
        return self.live.known_labels

    @property
    def inputs(self) -> dict[str, dict[str, int]]:
        return self.live.inputs

    @property
    def vocabulary_checked_at(self) -> int:
        return self.live.vocabulary_checked_at

    @property
    def consecutive_invalid(self) -> int:
        """Invalid records in a row (the breaker trips at ``limits.max_consecutive_invalid``)."""
        return self.rejects.consecutive

    @consecutive_invalid.setter
    def consecutive_invalid(self, value: int) -> None:
        self.rejects.consecutive = value

    # the outbox's counts, as the metrics and tests read them
    @property
    def published(self) -> int:
        return self.outbox.published

    @property
    def refused_events(self) -> int:
        return self.outbox.refused_events

    @property
    def pending_events(self) -> int:
        return self.outbox.pending_events

    @property
    def _next_attempt(self) -> float:
        return self.outbox.next_attempt

    @_next_attempt.setter
    def _next_attempt(self, value: float) -> None:
        self.outbox.next_attempt = value

    @property
    def held_for_replicas(self) -> bool:
        """Whether the last delivery attempt held events back for the store's replicas."""
        return self.outbox.replication_holding
