"""Docs stay in sync with the code: every setting and every CLI flag is documented."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from noveld.daemon.cli import build_parser
from noveld.daemon.settings import Settings, load_settings, model_fingerprint
from noveld.schema import parse_event

ROOT = Path(__file__).resolve().parents[2]


def setting_keys(cls: type[BaseModel], prefix: str = "") -> list[str]:
    keys: list[str] = []
    for name, field in cls.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys += setting_keys(ann, f"{prefix}{name}.")
        else:
            keys.append(prefix + name)
    return keys


def test_every_setting_is_in_the_configuration_reference() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = [k for k in setting_keys(Settings) if f"`{k}`" not in text]
    assert not missing, f"undocumented settings: {missing}"


def test_every_run_flag_is_in_the_configuration_reference() -> None:
    text = (ROOT / "docs" / "configuration.md").read_text()
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    run = sub.choices["run"]  # type: ignore[index]
    flags = [o for a in run._actions for o in a.option_strings if o.startswith("--")]
    ignored = {"--help", "--config", "--quiet", "--sampled"}
    missing = [f for f in flags if f not in ignored and f"`{f}`" not in text]
    assert not missing, f"undocumented flags: {missing}"


def test_the_event_reference_examples_are_valid_events() -> None:
    """Every JSON example in docs/events.md parses as the event type it documents."""
    text = (ROOT / "docs" / "events.md").read_text()
    examples = re.findall(r"```json\n(.*?)```", text, re.S)
    kinds = {type(parse_event(block)).__name__ for block in examples}
    assert {"ClusterMerged", "DocumentAssigned", "DocumentsAssigned"} <= kinds


def test_the_fingerprint_paragraph_names_every_fingerprint_key() -> None:
    """Each key a stored state is refused over, for every engine and likelihood."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    paragraph = text.split("<!-- fingerprint -->")[1].split("<!-- /fingerprint -->")[0]
    keys: set[str] = set()
    for model in ({"kind": "dpmm"}, {"kind": "svi"}, {"kind": "hdp"},
                  {"likelihood": "vmf", "embedding_dim": 8}, {"likelihood": "edcm"},
                  {"likelihood": "hybrid", "featurizer": "hybrid"}):  # fmt: skip
        keys |= set(model_fingerprint(load_settings(None, {"model": model}))) - {"schema"}
    missing = sorted(k for k in keys if f"`{k}`" not in paragraph)
    assert not missing, f"fingerprint keys not in docs/configuration.md: {missing}"


def test_the_readme_shows_the_compose_stack_and_how_to_watch_the_events() -> None:
    """A newcomer's first production-like try: start the stack, feed it, watch its events."""
    text = (ROOT / "README.md").read_text()
    assert "docker compose -f deploy/compose.yaml up" in text
    assert "noveld produce" in text and "--kafka-bootstrap localhost:9094" in text
    assert "kcat -b localhost:9094 -t noveld.events" in text
    assert "kafka-console-consumer.sh" in text and "--topic noveld.events" in text
