"""Why the Redis scripts refuse: the reason codes they return, the words an operator reads for
each, and which refusals a second live writer causes (classified by code, never by text)."""

from __future__ import annotations

from collections.abc import Sequence

#: the commit script's reason codes (commit.lua), each with its operator message; ``{0}``, …
#: are the facts the script returns with the code
COMMIT_REASONS = {
    "meta_lost": "namespace meta has no fingerprint",
    "vocab_stale": "vocabulary generation {0} ~= {1}",
    "epoch_fenced": "{0} epoch {1} ~= {2}",
    "lease_held": "the writer lease is held by writer {0}",
    "lease_lapsed": (
        "the writer lease lapsed and another writer stepped the model meanwhile ({0} log entries)"
    ),
    "offset_replay": "{0} stored {1} > {2}",
    "offset_gap": "{0} gap: stored {1} < {2}",
    "uid_slot_shared": "uid slot {0} is at {1}, writer assumed {2} (two writers share a slot?)",
    "log_ahead": "log ends at {0} but meta says {1}",
}

#: the interning script's error codes (intern.lua), each with its operator message
INTERN_REASONS = {
    "NOVELD_STALE": "the vocabulary was compacted (generation {0}, this writer loaded {1})",
    "NOVELD_VOCAB": "the vocabulary holds {0} words, this writer knows {1}",
}

#: refusals by the single writer's lease (svi)
LEASE_REASONS = frozenset({"lease_held", "lease_lapsed"})

#: the commit script's conflicts that a second live writer causes
ANOTHER_WRITER_REASONS = frozenset({"offset_gap", "uid_slot_shared"})


def commit_reason(code: str, facts: Sequence[str]) -> str:
    """The operator message of a commit script reason (the code itself if unknown)."""
    template = COMMIT_REASONS.get(code)
    return code if template is None else template.format(*facts)


def lease_refusal(code: str, facts: Sequence[str]) -> str:
    """Why the writer lease refused the commit, '' when the refusal was not the lease's."""
    return commit_reason(code, facts) if code in LEASE_REASONS else ""


def intern_error(message: str) -> tuple[str, str] | None:
    """The code and operator message of an interning script error (its text: the code and the
    facts, space separated); None for an error that is not the script's."""
    words = message.split()
    template = INTERN_REASONS.get(words[0]) if words else None
    if template is None:
        return None
    return words[0], template.format(*words[1:])


class StoreConflict(RuntimeError):
    """The stored state moved under this writer (offset gap, shared uid slot): reload.
    ``another_writer``: the conflict is one a live second writer causes (the state may well be
    intact), not a loss of keys."""

    def __init__(self, message: str, another_writer: bool = False) -> None:
        super().__init__(message)
        self.another_writer = another_writer

    @classmethod
    def from_commit(cls, code: str, facts: Sequence[str] = ()) -> StoreConflict:
        """The conflict the commit script (commit.lua) reported with ``code`` and its facts."""
        return cls(commit_reason(code, facts), code in ANOTHER_WRITER_REASONS)
