"""The in-memory working copy of a namespace that the stages share: the committed state and
the vocabulary, featurizer, novelty tracker and bookkeeping built from it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from noveld.daemon.settings import NoveltySettings
from noveld.featurize import Featurizer
from noveld.models.kernels import multinomial as kern
from noveld.models.novelty import NoveltyTracker
from noveld.models.vocabulary import Vocabulary
from noveld.state.base import NamespaceState


@dataclass
class LiveNamespace:
    """One namespace as this process holds it between commits."""

    state: NamespaceState
    vocab: Vocabulary
    featurizer: Featurizer
    tracker: NoveltyTracker
    #: uids of the clusters this writer announced (``cluster.born``) and not yet ended
    announced: set[int]
    #: the document count of the last vocabulary check
    vocabulary_checked_at: int
    #: cluster uid -> known label (``model.use_labels``)
    known_labels: dict[int, str]
    #: per file or stdin input, the checksum of the lines committed from it (``offset``,
    #: ``crc32``): what a resumed run compares the lines it skips with
    inputs: dict[str, dict[str, int]]

    @classmethod
    def from_state(
        cls,
        state: NamespaceState,
        vocab: Vocabulary,
        featurizer: Featurizer,
        novelty: NoveltySettings,
    ) -> LiveNamespace:
        """The working copy of ``state`` (just loaded, or loaded afresh by the store after
        another writer's compaction), around its already built vocabulary and featurizer."""
        tracker = NoveltyTracker(
            novelty.min_size, novelty.confirm_within, novelty.exemplars, novelty.hold_docs
        )
        tracker.load_json(state.novelty)
        return cls(
            state=state,
            vocab=vocab,
            featurizer=featurizer,
            tracker=tracker,
            announced=set(state.novelty.get("announced", [])),
            # a namespace from before the count was kept: checked where it stands
            vocabulary_checked_at=int(
                state.novelty.get("vocabulary_checked_at", state.stats.ictl[kern.DOCS_SEEN])
            ),
            known_labels={
                int(u): str(label) for u, label in state.novelty.get("known", {}).items()
            },
            inputs=dict(state.novelty.get("inputs", {})),
        )

    def novelty_json(self) -> dict[str, Any]:
        """The novelty state as stored: the tracker and this writer's bookkeeping."""
        novelty = self.tracker.to_json()
        novelty["announced"] = sorted(self.announced)
        novelty["vocabulary_checked_at"] = self.vocabulary_checked_at
        novelty["known"] = {str(u): label for u, label in sorted(self.known_labels.items())}
        if self.inputs:
            novelty["inputs"] = {k: dict(v) for k, v in sorted(self.inputs.items())}
        return novelty

    def take_in_foreign(self, seated: dict[int, int]) -> None:
        """After the store applied other writers' entries to ``state``: the words they added
        join the vocabulary, and the documents they seated (per cluster uid) count for this
        writer's novelty candidates."""
        if len(self.state.vocab) > len(self.vocab):
            self.vocab.extend(self.state.vocab[len(self.vocab) :])
        self.tracker.count_foreign(seated)

    def sync_state(self) -> None:
        """Copy the featurizer's vocabulary and the tracker into the durable state object."""
        self.state.vocab = self.vocab.to_list()
        self.state.vocab_gone = self.vocab.gone
        self.state.vocab_checked = self.vocab.checked
        self.state.novelty = self.novelty_json()
