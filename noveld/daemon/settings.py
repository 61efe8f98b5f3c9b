"""The one frozen configuration object (DESIGN §9): defaults ← TOML file ← ``NOVELD_*`` env ← CLI.

Environment variables use the prefix ``NOVELD_`` and ``__`` between levels, e.g.
``NOVELD_MODEL__ALPHA=0.05`` or ``NOVELD_BATCH__MAX_DOCS=512``.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings.exceptions import SettingsError

from noveld.state.redis_url import check_url

_BOOL_WORDS = {
    **dict.fromkeys(("true", "1", "yes", "on"), "document"),
    **dict.fromkeys(("false", "0", "no"), "off"),
}
"""Boolean spellings accepted for ``events.assignments`` (an env var is always a string)."""


COMPLETE = "complete"
"""Validation-context key: these are the final, merged settings (cross-field checks apply)."""


class _Section(BaseModel):
    # inf passes every bound a number can have (gt=0, ge=0) yet breaks the model: refused
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ModelSettings(_Section):
    """Which model and its hyperparameters (DESIGN §5)."""

    kind: Literal["dpmm", "svi", "hdp"] = Field("dpmm", description="inference engine")
    likelihood: Literal["multinomial", "edcm", "vmf"] = Field(
        "multinomial",
        description=(
            "dpmm: multinomial (words), edcm (which words: long, bursty documents) or vmf (the "
            "documents' embeddings), DESIGN §5.1"
        ),
    )
    embedding_dim: int = Field(0, ge=0, description="vmf: embedding dimension p (required)")
    vmf_cosine: float = Field(
        0.5, gt=0, lt=1, description="vmf: typical cosine of a member to its cluster's mean (κ)"
    )
    edcm_prior: float = Field(0.001, gt=0, description="edcm: symmetric prior b0 of each β_w")
    edcm_prior_docs: float = Field(
        5.0, gt=0, description="edcm: weight of the prior, in documents (c)"
    )
    alpha: float = Field(0.03, gt=0, description="DP concentration (per document if scaled)")
    beta: float = Field(0.01, gt=0, description="symmetric Dirichlet prior on cluster words")
    alpha_scaling: Literal["none", "batch"] = "batch"
    discount: float = Field(0.5, ge=0, lt=1, description="Pitman–Yor discount (0 = DP)")
    rejuvenation_sweeps: int = Field(2, ge=0, le=1000)
    deterministic: bool = Field(True, description="MAP seating instead of sampling")
    half_life_docs: float = Field(0.0, ge=0, description="forgetting half-life; 0 = off")
    retire_min_mass: float = Field(0.05, ge=0)
    max_active_clusters: int = Field(5000, ge=1)
    merge: bool = Field(True, description="merge new clusters into others when that is MAP")
    absorb_margin: float = Field(
        20.0, ge=0, description="use_labels: log-odds to absorb a cluster into a known category"
    )
    split: bool = Field(True, description="dpmm: split a batch's burst out of an old cluster")
    use_labels: bool = Field(False, description="documents' labels are known categories")
    kappa: float = Field(0.8, gt=0.5, le=1.0, description="svi: step-size exponent κ")
    tau0: float = Field(1.0, ge=0, description="svi: step-size delay τ₀")
    corpus_size: float = Field(0.0, ge=0, description="svi: effective corpus size D (0 = seen)")
    local_step: Literal["cvb0", "vb"] = Field("cvb0", description="svi: local step")
    local_sweeps: int = Field(0, ge=0, description="svi: extra local-step passes per batch")
    topics: int = Field(
        2000, ge=1, le=10_000, description="hdp: number of topics L (more than live categories)"
    )
    zeta: float = Field(5e-4, gt=0, description="hdp: Dirichlet prior ζ of categories on topics")
    gamma: float = Field(10.0, gt=0, description="hdp: category concentration γ (start value)")
    table_alpha: float = Field(
        1.0, gt=0, description="hdp: per-document table concentration α (start value)"
    )
    resample_concentrations: bool = Field(
        True, description="hdp: draw α and γ each batch by the auxiliary-variable method"
    )
    use_context: bool = Field(
        True, description="hdp: documents' context fields are categorical evidence of category"
    )
    context_prior: float = Field(
        0.1, gt=0, description="hdp: Dirichlet prior η of a category's context values"
    )
    seed: int = Field(0, ge=0, lt=2**63, description="random seed (non-negative)")

    @model_validator(mode="after")
    def _vmf_needs_dpmm_and_dimension(self) -> ModelSettings:
        """The edcm and vmf likelihoods are ``dpmm`` options; vmf needs the stream's embedding
        dimension; ``svi`` has no forgetting half-life to ignore."""
        if self.likelihood == "edcm" and self.kind != "dpmm":
            raise ValueError(f"likelihood 'edcm' is a dpmm option, not {self.kind!r}")
        if self.likelihood == "vmf":
            if self.kind != "dpmm":
                raise ValueError(f"likelihood 'vmf' is a dpmm option, not {self.kind!r}")
            if self.embedding_dim < 2:
                raise ValueError("likelihood 'vmf' needs model.embedding_dim (>= 2)")
        if self.kind == "svi" and self.half_life_docs > 0:
            raise ValueError(
                "half_life_docs (forgetting) is a dpmm and hdp setting: svi forgets through its "
                "step size (kappa, tau0); leave half_life_docs at 0 with --model svi"
            )
        return self


class BatchSettings(_Section):
    """Mini-batch formation."""

    max_docs: int = Field(256, ge=1, le=100_000)
    max_wait_ms: int = Field(500, ge=0)


class NoveltySettings(_Section):
    """Birth confirmation (DESIGN §5.4)."""

    min_size: int = Field(3, ge=1)
    confirm_within: int = Field(2000, ge=1)
    top_terms: int = Field(10, ge=1)
    exemplars: int = Field(5, ge=1)
    refound: bool = Field(
        True, description="founding doc = first member that still fits the cluster at confirmation"
    )


class EventsSettings(_Section):
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


class LimitsSettings(_Section):
    """Input guards."""

    max_doc_bytes: int = Field(1_000_000, ge=1)
    max_consecutive_invalid: int = Field(1000, ge=1)


class FieldSettings(_Section):
    """Names of the input document's fields (DESIGN §4)."""

    id: str = Field("id", min_length=1)
    text: str = Field("text", min_length=1)
    tokens: str = Field("tokens", min_length=1)
    embedding: str = Field("embedding", min_length=1)
    label: str = Field("label", min_length=1)
    context: str = Field("context", min_length=1)
    ts: str = Field("ts", min_length=1)


class TokenizerSettings(_Section):
    """Text → tokens."""

    lowercase: bool = True
    min_token_len: int = Field(1, ge=1)


class StateSettings(_Section):
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


_TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")


class KafkaSettings(_Section):
    """Kafka input and output topics (production mode)."""

    bootstrap_servers: str | None = None
    input_topic: str | None = None
    group: str = Field("noveld", min_length=1)
    events_topic: str = "noveld.events"
    dlq_topic: str = "noveld.dlq"
    session_timeout_ms: int = Field(10_000, ge=1000)
    accept_empty_state: bool = Field(
        False,
        description="start even when the namespace has no offsets for the input topic but "
        "the consumer group has read it before (otherwise exit 6: the namespace's state was "
        "probably lost, and starting would re-read only what the topic retains under old "
        "event ids)",
    )
    startup_timeout_s: float = Field(
        15.0,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="longest wait for each Kafka client to start (connect, TLS handshake, "
        "first metadata) before the start fails with exit 2",
    )
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", description="how clients talk to the brokers (TLS: SSL or SASL_SSL)"
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_cafile: Path | None = Field(None, description="CA bundle (PEM); default: the system's")
    ssl_certfile: Path | None = Field(None, description="client certificate (PEM), for mTLS")
    ssl_keyfile: Path | None = Field(None, description="client key (PEM), for mTLS")
    ssl_check_hostname: bool = True

    @field_validator("input_topic", "events_topic", "dlq_topic")
    @classmethod
    def _legal_topic_name(cls, value: str | None) -> str | None:
        """Kafka's own rule for topic names, checked at start-up: an illegal events topic was
        found only when the first event was sent, after its commit, so every restart failed
        again on the event waiting in the outbox."""
        if value is not None and (not _TOPIC_NAME.fullmatch(value) or value in (".", "..")):
            raise ValueError(
                f"{value!r} is not a legal Kafka topic name (1-249 of A-Z a-z 0-9 . _ -)"
            )
        return value

    @model_validator(mode="after")
    def _topics_do_not_loop(self) -> KafkaSettings:
        """Input, events and DLQ topics differ, and a bootstrap list is not blank: events read
        back as documents, or a dead letter read back as input (around and around until the
        circuit breaker), and an empty bootstrap silently meaning stdin, were accepted."""
        if self.bootstrap_servers is not None and not self.bootstrap_servers.strip(" ,"):
            raise ValueError(
                "kafka.bootstrap_servers is empty; give host:port[,host:port…], or leave it "
                "unset to read --input FILE or stdin"
            )
        for server in (self.bootstrap_servers or "").split(","):
            if server.strip() and not _is_host_port(server.strip()):
                raise ValueError(
                    f"kafka.bootstrap_servers: {server.strip()!r} is not host[:port] (a port "
                    "1-65535; an IPv6 address in brackets, [::1]:9092)"
                )
        roles = {"events_topic": self.events_topic, "dlq_topic": self.dlq_topic}
        if self.input_topic is not None:
            roles = {"input_topic": self.input_topic, **roles}
        seen: dict[str, str] = {}
        for role, topic in roles.items():
            if topic in seen:
                raise ValueError(
                    f"kafka.{seen[topic]} and kafka.{role} are both {topic!r}; noveld would "
                    "read its own output back"
                )
            seen[topic] = role
        return self

    @model_validator(mode="after")
    def _security_is_consistent(self, info: ValidationInfo) -> KafkaSettings:
        """SASL settings only with a SASL protocol (and then all of them), TLS files only with
        TLS, and every named file readable: a mistake here is a start-up error, not a hang.
        Checked on the complete settings only (``load_settings``), since one layer may name
        the protocol (a flag) and another the password (the environment)."""
        if not (info.context or {}).get(COMPLETE):
            return self
        if self.bootstrap_servers is None and self.security_protocol == "PLAINTEXT":
            return self  # Kafka not in use: a shared secret in the environment is harmless
        sasl = self.security_protocol.startswith("SASL_")
        tls = self.security_protocol.endswith("SSL")
        given = [
            name
            for name in ("sasl_mechanism", "sasl_username", "sasl_password")
            if getattr(self, name) is not None
        ]
        if sasl and len(given) < 3:
            missing = {"sasl_mechanism", "sasl_username", "sasl_password"} - set(given)
            raise ValueError(
                f"security_protocol {self.security_protocol} needs "
                + ", ".join(f"kafka.{m}" for m in sorted(missing))
            )
        if not sasl and given:
            raise ValueError(
                f"kafka.{given[0]} is set but security_protocol is {self.security_protocol} "
                "(SASL_PLAINTEXT or SASL_SSL use it)"
            )
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
            path = getattr(self, name)
            if path is None:
                continue
            if not tls:
                raise ValueError(
                    f"kafka.{name} is set but security_protocol is {self.security_protocol} "
                    "(SSL or SASL_SSL use it)"
                )
            if not path.is_file():
                raise ValueError(f"kafka.{name}: no such file {str(path)!r}")
        if self.ssl_keyfile is not None and self.ssl_certfile is None:
            raise ValueError("kafka.ssl_keyfile needs kafka.ssl_certfile (the client certificate)")
        return self

    def client_options(self) -> dict[str, Any]:
        """kafka-python keyword arguments for these security settings (for every client:
        consumer, producers, admin); empty for PLAINTEXT, kafka-python's default."""
        if self.security_protocol == "PLAINTEXT":
            return {}
        opts: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.security_protocol.startswith("SASL_"):
            assert self.sasl_password is not None  # the validator saw to it
            opts["sasl_mechanism"] = self.sasl_mechanism
            opts["sasl_plain_username"] = self.sasl_username
            opts["sasl_plain_password"] = self.sasl_password.get_secret_value()
        if self.security_protocol.endswith("SSL"):
            opts["ssl_check_hostname"] = self.ssl_check_hostname
            for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile"):
                path = getattr(self, name)
                if path is not None:
                    opts[name] = str(path)
        return opts


class RedisSettings(_Section):
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


class Settings(BaseSettings):
    """Effective configuration of one noveld process."""

    model_config = SettingsConfigDict(
        env_prefix="NOVELD_",
        env_nested_delimiter="__",
        frozen=True,
        extra="forbid",
        hide_input_in_errors=True,  # a Redis URL may carry a password: name field and reason
    )

    namespace: str = Field("default", min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    input: str | None = None
    dlq: Path | None = None
    progress_interval_s: float = Field(2.0, gt=0, allow_inf_nan=False)
    metrics_port: int | None = Field(None, ge=0, le=65535)
    model: ModelSettings = ModelSettings()
    batch: BatchSettings = BatchSettings()
    novelty: NoveltySettings = NoveltySettings()
    events: EventsSettings = EventsSettings()
    limits: LimitsSettings = LimitsSettings()
    fields: FieldSettings = FieldSettings()
    tokenizer: TokenizerSettings = TokenizerSettings()
    state: StateSettings = StateSettings()
    redis: RedisSettings = RedisSettings()
    kafka: KafkaSettings = KafkaSettings()

    def dlq_path(self) -> Path:
        """Where dead letters go in embedded mode."""
        if self.dlq is not None:
            return self.dlq
        if self.state.dir is not None:
            return self.state.dir / "dlq.jsonl"
        return Path("noveld-dlq.jsonl")


def unknown_env_names(environ: Mapping[str, str]) -> list[str]:
    """``NOVELD_…`` variables that name no setting (a typo such as ``NOVELD_STATE_DIR`` for
    ``NOVELD_STATE__DIR`` is otherwise ignored without a word). Nested names are checked by
    the settings themselves; ``NOVELD_TEST_…`` belong to the test harness, and
    ``NOVELD_NUMBA_CACHE_SEED`` to the launcher (:func:`noveld.launch.seed_numba_cache`)."""
    top = {name.upper() for name in Settings.model_fields}
    unknown = []
    for name in sorted(environ):
        if not name.startswith("NOVELD_") or name.startswith("NOVELD_TEST_"):
            continue
        if name == "NOVELD_NUMBA_CACHE_SEED":
            continue
        head = name[len("NOVELD_") :].split("__", 1)[0]
        if head not in top:
            unknown.append(name)
    return unknown


def _deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in top.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _is_host_port(server: str) -> bool:
    """``host``, ``host:port`` or ``[ipv6]:port`` with a port in 1–65535."""
    if server.startswith("["):
        addr, sep, rest = server[1:].partition("]")
        if not sep or not addr:
            return False
        if not rest:
            return True
        if not rest.startswith(":"):
            return False
        port = rest[1:]
    elif ":" in server:
        host, port = server.rsplit(":", 1)
        if not host or ":" in host:
            return False
    else:
        return True
    return port.isdigit() and 1 <= int(port) <= 65535


class ConfigError(ValueError):
    """A configuration file or environment that cannot be read (the CLI exits 2)."""


def load_settings(
    config_file: Path | None = None, overrides: dict[str, Any] | None = None
) -> Settings:
    """Build the settings: defaults, then the TOML file, then env vars, then CLI ``overrides``.

    Raises ``pydantic.ValidationError`` (the CLI turns it into a clear message) or
    ``FileNotFoundError`` for a missing config file.
    """
    if config_file is not None and not config_file.exists():
        raise FileNotFoundError(f"config file {config_file} does not exist")
    if config_file is not None and not config_file.is_file():
        raise ConfigError(f"config file {config_file} is not a file")

    class _FileSettings(Settings):
        @classmethod
        def settings_customise_sources(
            cls,
            settings_cls: type[BaseSettings],
            init_settings: PydanticBaseSettingsSource,
            env_settings: PydanticBaseSettingsSource,
            dotenv_settings: PydanticBaseSettingsSource,
            file_secret_settings: PydanticBaseSettingsSource,
        ) -> tuple[PydanticBaseSettingsSource, ...]:
            sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
            if config_file is not None:
                sources.append(TomlConfigSettingsSource(settings_cls, toml_file=config_file))
            return tuple(sources)

    # Nested CLI overrides must merge with env/TOML sections rather than replace them, so the
    # lower layers are resolved first and the overrides merged on top.
    try:
        base = _FileSettings().model_dump()
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {config_file} is not valid TOML: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {config_file} is not UTF-8 text ({exc.reason})") from exc
    except SettingsError as exc:  # e.g. NOVELD_MODEL=garbage: a whole section must be JSON
        raise ConfigError(
            f"{exc}; a section set by one environment variable (e.g. NOVELD_MODEL) takes a JSON "
            "object — set single keys with two underscores instead (NOVELD_MODEL__ALPHA=0.1)"
        ) from exc
    if config_file is not None:
        problem = _toml_type_problem(Settings, tomllib.loads(config_file.read_text("utf-8")), "")
        if problem is not None:
            raise ConfigError(f"config file {config_file}: {problem}")
    merged = _deep_merge(base, overrides or {})
    settings = Settings.model_validate(merged)
    _check_complete(settings.kafka, "kafka")
    return settings


_TOML_KINDS: dict[type, tuple[tuple[type, ...], str]] = {
    bool: ((bool,), "true or false"),
    int: ((int,), "a whole number"),
    float: ((int, float), "a number"),
}
"""What a TOML value of a bool, int or float setting must be (checked before pydantic, whose lax
mode would read ``max_docs = true`` as 1 and ``deterministic = "no"`` as false)."""


def _toml_kind(value: Any) -> str:
    """A TOML value's type, in TOML's words."""
    names = {bool: "a boolean", int: "an integer", float: "a float", str: "a string"}
    names |= {list: "an array", dict: "a table"}
    return names.get(type(value), type(value).__name__)


def _toml_type_problem(model: type[BaseModel], data: dict[str, Any], where: str) -> str | None:
    """The first boolean or number setting of a TOML file given a value of another type
    (``batch.max_docs is a boolean (true); it takes a whole number``), or None."""
    for key, value in data.items():
        field = model.model_fields.get(key)
        if field is None:  # an unknown key: pydantic names it
            continue
        args = get_args(field.annotation) or (field.annotation,)
        kinds = [a for a in args if a is not type(None)]
        nested = kinds[0] if len(kinds) == 1 else None
        if isinstance(nested, type) and issubclass(nested, BaseModel) and isinstance(value, dict):
            problem = _toml_type_problem(nested, value, f"{where}{key}.")
            if problem is not None:
                return problem
            continue
        kind = _TOML_KINDS.get(nested) if isinstance(nested, type) else None
        if kind is not None and (type(value) not in kind[0]):
            shown = json.dumps(value) if isinstance(value, bool | int | float | str) else "…"
            return f"{where}{key} is {_toml_kind(value)} ({shown}); it takes {kind[1]}"
    return None


def _check_complete(section: BaseModel, name: str) -> None:
    """Run a section's cross-field checks on the final settings (a pydantic-settings model
    re-validates through ``__init__``, which drops the validation context, so this is done
    once here); errors are reported under the section's name."""
    try:
        type(section).model_validate(section.model_dump(), context={COMPLETE: True})
    except ValidationError as exc:
        errors: list[InitErrorDetails] = [
            {
                "type": e["type"],
                "loc": (name, *e["loc"]),
                "input": e["input"],
                "ctx": e.get("ctx", {}),
            }
            for e in exc.errors()
        ]
        raise ValidationError.from_exception_data("Settings", errors, hide_input=True) from None


def _kind_fingerprint(settings: Settings) -> dict[str, Any]:
    """Model-specific settings that shape the stored statistics: ``svi``'s step-size schedule
    and corpus size; ``hdp``'s topic count, priors and context use; the likelihoods' priors."""
    m = settings.model
    if m.kind == "svi":
        return {"kappa": m.kappa, "tau0": m.tau0, "corpus_size": m.corpus_size}
    if m.kind == "hdp":
        return {
            "topics": m.topics,
            "zeta": m.zeta,
            "gamma": m.gamma,
            "table_alpha": m.table_alpha,
            "use_context": m.use_context,
            "context_prior": m.context_prior,
        }
    if m.likelihood == "vmf":
        return {"embedding_dim": m.embedding_dim, "vmf_cosine": m.vmf_cosine}
    if m.likelihood == "edcm":
        return {"edcm_prior": m.edcm_prior, "edcm_prior_docs": m.edcm_prior_docs}
    return {}


def model_fingerprint(settings: Settings) -> dict[str, Any]:
    """Settings that change the meaning of stored statistics; a mismatch refuses to start."""
    m = settings.model
    return {
        "schema": 1,
        "kind": m.kind,
        "likelihood": m.likelihood,
        "alpha": m.alpha,
        "beta": m.beta,
        "alpha_scaling": m.alpha_scaling,
        "discount": m.discount,
        "half_life_docs": m.half_life_docs,
        **_kind_fingerprint(settings),
        "lowercase": settings.tokenizer.lowercase,
        "min_token_len": settings.tokenizer.min_token_len,
    }
