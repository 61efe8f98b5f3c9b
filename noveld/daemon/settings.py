"""The one frozen configuration object: defaults ← TOML file ← ``NOVELD_*`` env ← CLI.

Environment variables use the prefix ``NOVELD_`` and ``__`` between levels, e.g.
``NOVELD_MODEL__ALPHA=0.05`` or ``NOVELD_BATCH__MAX_DOCS=512``. The sections live in
``settings_sections``, ``settings_model`` and ``settings_kafka``; they are importable from here.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import Field
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)
from pydantic_settings.exceptions import SettingsError

from noveld.daemon.model_kinds import kind_fingerprint
from noveld.daemon.settings_checks import check_complete, toml_type_problem
from noveld.daemon.settings_kafka import KafkaSettings
from noveld.daemon.settings_model import ModelSettings
from noveld.daemon.settings_sections import (
    COMPLETE,
    BatchSettings,
    EventsSettings,
    FieldSettings,
    LimitsSettings,
    NoveltySettings,
    RedisSettings,
    StateSettings,
    StoriesSettings,
    TokenizerSettings,
    UiSettings,
)

__all__ = [
    "COMPLETE",
    "BatchSettings",
    "ConfigError",
    "EventsSettings",
    "FieldSettings",
    "KafkaSettings",
    "LimitsSettings",
    "ModelSettings",
    "NoveltySettings",
    "RedisSettings",
    "Settings",
    "StateSettings",
    "StoriesSettings",
    "TokenizerSettings",
    "UiSettings",
    "load_settings",
    "model_fingerprint",
    "unknown_env_names",
]


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
    stories: StoriesSettings = StoriesSettings()
    events: EventsSettings = EventsSettings()
    limits: LimitsSettings = LimitsSettings()
    fields: FieldSettings = FieldSettings()
    tokenizer: TokenizerSettings = TokenizerSettings()
    state: StateSettings = StateSettings()
    redis: RedisSettings = RedisSettings()
    kafka: KafkaSettings = KafkaSettings()
    ui: UiSettings = UiSettings()

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
        # only what was set: defaults that follow other settings (the likelihood and the
        # featurizer) are filled in once, after the overrides
        base = _FileSettings().model_dump(exclude_unset=True)
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
        problem = toml_type_problem(Settings, tomllib.loads(config_file.read_text("utf-8")), "")
        if problem is not None:
            raise ConfigError(f"config file {config_file}: {problem}")
    merged = _deep_merge(base, overrides or {})
    settings = Settings.model_validate(merged)
    check_complete(settings.kafka, "kafka")
    return settings


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
        **kind_fingerprint(m),
        "lowercase": settings.tokenizer.lowercase,
        "min_token_len": settings.tokenizer.min_token_len,
    }
