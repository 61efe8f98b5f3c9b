"""The settings' sections (batching, novelty, events, limits, fields, tokenizer, state, Redis)
and their common base: frozen pydantic models that refuse unknown keys and infinities."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from noveld.state.redis_url import check_url

_BOOL_WORDS = {
    **dict.fromkeys(("true", "1", "yes", "on"), "document"),
    **dict.fromkeys(("false", "0", "no"), "off"),
}
"""Boolean spellings accepted for ``events.assignments`` (an env var is always a string)."""


COMPLETE = "complete"
"""Validation-context key: these are the final, merged settings (cross-field checks apply)."""


class Section(BaseModel):
    """A settings section: frozen, no unknown keys."""

    # inf passes every bound a number can have (gt=0, ge=0) yet breaks the model: refused
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class BatchSettings(Section):
    """Mini-batch formation."""

    max_docs: int = Field(256, ge=1, le=100_000)
    max_wait_ms: int = Field(500, ge=0)
    share: bool = Field(
        True,
        description=(
            "Kafka: a replica's batch is max_docs times its share of the input partitions, so "
            "the replicas together seat about one batch between two exchanges of deltas"
        ),
    )
    refresh: bool = Field(
        True,
        description=(
            "Redis: before seating a batch, take in what other replicas of the namespace "
            "committed since this replica's last commit (one read), so it seats against the "
            "newest shared model (skipped while no other replica commits); off: only at its "
            "own commits"
        ),
    )
    prefetch: bool = Field(
        False,
        description=(
            "file input, semantic and hybrid featurizers: read, decode and encode the next "
            "batch on a second thread while the model steps this one (for a core to spare: "
            "it costs 10-15 % more CPU)"
        ),
    )


class NoveltySettings(Section):
    """Birth confirmation."""

    min_size: int = Field(3, ge=1)
    confirm_within: int = Field(2000, ge=1)
    top_terms: int = Field(10, ge=1)
    exemplars: int = Field(5, ge=1)
    refound: bool = Field(
        True, description="founding doc = first member that still fits the cluster at confirmation"
    )
    hold_docs: int = Field(
        0,
        ge=0,
        description="replicas: while others open clusters too, hold a confirmed birth until the "
        "namespace counted this many more documents, then announce it under the cluster it was "
        "merged into, once (0: at once; 1024 suits 4 replicas at batch 256)",
    )


class StoriesSettings(Section):
    """Story summaries kept in the state for ``noveld stories`` (noveld.models.stories)."""

    enabled: bool = Field(True, description="keep a summary of each live cluster in the state")
    exemplar_text: bool = Field(
        True, description="keep exemplar documents' text (false: their ids only, for privacy)"
    )
    bucket_seconds: int = Field(3600, ge=1, description="width of a growth bucket (event time)")
    buckets: int = Field(24, ge=1, le=1000, description="growth buckets kept per story")
    exemplars: int = Field(3, ge=0, le=100, description="exemplar documents per story")
    terms: int = Field(8, ge=1, le=100, description="top terms per story")
    text_chars: int = Field(200, ge=1, le=10_000, description="exemplar text kept, in characters")
    max_stories: int = Field(10_000, ge=1, description="summaries kept at most")


class EventsSettings(Section):
    """Optional event types beyond the cluster events (docs/events.md)."""

    assignments: Literal["off", "document", "batch"] = Field(
        "off",
        description=(
            "each document's cluster: off, document (a document.assigned event per document) or "
            "batch (a documents.assigned event per batch and input partition); true = document"
        ),
    )

    @field_validator("assignments", mode="before")
    @classmethod
    def _assignments_from_bool(cls, value: Any) -> Any:
        """``true``/``false`` (the setting's earlier boolean form) mean document/off."""
        if isinstance(value, bool):
            return "document" if value else "off"
        if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
            return _BOOL_WORDS[value.strip().lower()]
        return value


class LimitsSettings(Section):
    """Input guards."""

    max_doc_bytes: int = Field(
        1_000_000,
        ge=1,
        description="records longer than this are dead-lettered as oversize (the reader keeps "
        "at most this many bytes of a record, and a cut record is not JSON)",
    )
    max_doc_tokens: int = Field(
        16_384,
        ge=1,
        description="a document's tokens past this many (about 100 KB of English) are cut or "
        "the document is dead-lettered, as limits.oversize says",
    )
    oversize: Literal["truncate", "dead-letter"] = Field(
        "truncate",
        description="a document longer than max_doc_tokens: truncate (keep its first "
        "max_doc_tokens tokens, counted in the run's summary and metrics) or dead-letter "
        "(reason oversize)",
    )
    max_consecutive_invalid: int = Field(1000, ge=1)


class FieldSettings(Section):
    """Names of the input document's fields."""

    id: str = Field("id", min_length=1)
    text: str = Field("text", min_length=1)
    tokens: str = Field("tokens", min_length=1)
    embedding: str = Field("embedding", min_length=1)
    label: str = Field("label", min_length=1)
    context: str | list[str] = Field(
        "context",
        description="the field(s) of the document's context: each an object of context fields "
        "or a scalar (one context field, named after it)",
    )
    ts: str = Field("ts", min_length=1)

    @field_validator("context")
    @classmethod
    def _context_names(cls, value: str | list[str]) -> str | list[str]:
        """Field names, none empty, each once; a single one as a plain string."""
        names = [value] if isinstance(value, str) else list(dict.fromkeys(value))
        if not names or not all(names):
            raise ValueError("context field names must be non-empty")
        return names[0] if len(names) == 1 else names


class TokenizerSettings(Section):
    """Text → tokens."""

    lowercase: bool = True
    min_token_len: int = Field(1, ge=1)


class StateSettings(Section):
    """State: the embedded snapshot directory and cadence; vocabulary compaction (every store)."""

    dir: Path | None = None
    snapshot_interval_s: float = Field(5.0, ge=0)
    compact_vocabulary_at: int = Field(
        100_000,
        ge=0,
        description="dpmm and hdp: once the vocabulary holds this many words "
        "and no live cluster counts half of them (forgotten or retired stories' words), "
        "renumber the word ids over the words in use and keep the others as 8-byte hashes; "
        "the model's results do not change. 0 = never",
    )

    @field_validator("dir", mode="before")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        """An empty value (``NOVELD_STATE__DIR=``) would mean the working directory."""
        if isinstance(value, str) and not value.strip():
            raise ValueError("is empty: name a directory, or leave it unset for no snapshots")
        return value


class RedisSettings(Section):
    """Redis state store (instead of the in-process store with snapshots)."""

    url: SecretStr | None = Field(
        None,
        description="redis://, rediss:// or unix:// of a server or a cluster's endpoint; "
        "redis+sentinel://host:port[,host:port...]/service[/db] for a Sentinel-managed primary",
    )
    replicas_to_ack: int = Field(
        0,
        ge=0,
        description="publish a commit's events only once this many replicas acknowledge it "
        "(WAIT), so a failover cannot lose a commit whose events were published",
    )
    replica_ack_timeout_ms: int = Field(
        200, ge=1, le=60_000, description="longest WAIT for the replicas per attempt"
    )
    socket_timeout_s: float = Field(
        10.0,
        ge=2.0,
        le=3600.0,
        description="longest wait for one Redis reply; past it Redis counts as unreachable "
        "(a hung server or a network that drops packets), and the daemon rides out the outage",
    )

    writer_lease_ms: int = Field(
        10_000,
        ge=1000,
        le=600_000,
        description="svi only (one writer per namespace): the writer's lease in Redis lapses "
        "this long after its holder stops renewing it (a crash); a standby replica then takes "
        "over (a graceful stop hands it over at once)",
    )

    @field_validator("url")
    @classmethod
    def _usable_url(cls, value: SecretStr | None) -> SecretStr | None:
        """A URL noveld cannot use fails at start-up, with no password in the message."""
        if value is not None:
            check_url(value.get_secret_value())
        return value

    @model_validator(mode="after")
    def _timeout_outlasts_waits(self) -> RedisSettings:
        """A reply may legitimately take as long as a ``WAIT`` for the replicas (and the 1 s
        ``WAITAOF``); a socket timeout below that would call a healthy Redis unreachable."""
        longest_wait_s = max(self.replica_ack_timeout_ms, 1000) / 1000
        if self.socket_timeout_s < longest_wait_s + 1.0:
            raise ValueError(
                f"redis.socket_timeout_s must be at least {longest_wait_s + 1.0:g} s "
                "(the replica ack timeout, or WAITAOF's 1 s, plus 1 s)"
            )
        return self


class UiSettings(Section):
    """The read-only web view of live stories (``noveld.daemon.web``): off unless a port is
    given. It shows document ids, labels and terms, so it listens on loopback by default and
    can ask for a bearer token."""

    port: int | None = Field(
        None, ge=0, le=65535, description="serve the view on this port (0 = any free); unset: off"
    )
    bind: str = Field(
        "127.0.0.1",
        min_length=1,
        description="address the view listens on (0.0.0.0 or :: for every interface)",
    )
    token: SecretStr | None = Field(
        None, description="bearer token the view asks for (NOVELD_UI__TOKEN); unset: none"
    )
    token_file: Path | None = Field(
        None, description="file holding the bearer token (its first line); instead of token"
    )

    @model_validator(mode="after")
    def _one_token(self) -> UiSettings:
        if self.token is not None and self.token_file is not None:
            raise ValueError("give ui.token or ui.token_file, not both")
        if self.token is not None and not self.token.get_secret_value().strip():
            raise ValueError("ui.token is empty: set a token, or leave it unset for none")
        return self
