"""The settings of one command line (config file, environment, then the given flags), and the
given flags these settings do not read, said rather than silently dropped."""

from __future__ import annotations

import argparse
import sys

from noveld.daemon.cli_options import KAFKA_ONLY, flag_giving, settings_overrides
from noveld.daemon.model_kinds import kind_of, readers, restricted_settings
from noveld.daemon.settings import Settings, load_settings


def settings_from(ns: argparse.Namespace) -> Settings:
    """The settings these parsed flags ask for; each flag they ignore is warned about."""
    settings = load_settings(getattr(ns, "config", None), settings_overrides(ns))
    for warning in ignored_flags(ns, settings):
        sys.stderr.write(f"noveld: warning: {warning}\n")
    return settings


def ignored_flags(ns: argparse.Namespace, settings: Settings) -> list[str]:
    """Flags given on the command line that these settings do not read (a model's flag with
    another model; state-dir snapshots with Redis), said rather than silently dropped."""
    said = _ignored_model_flags(ns, settings)
    if settings.redis.url is not None:
        if getattr(ns, "snapshot_interval", None) is not None:
            said.append("--snapshot-interval is ignored with --redis-url (every batch commits)")
        if getattr(ns, "state_dir", None) is not None:
            kafka = settings.kafka.bootstrap_servers is not None  # dead letters to a topic
            where = "" if kafka or settings.dlq else " (the dead-letter file still goes there)"
            said.append(f"--state-dir holds no state with --redis-url (Redis does){where}")
    if settings.kafka.bootstrap_servers is not None and getattr(ns, "dlq", None) is not None:
        said.append("--dlq is ignored in Kafka mode (dead letters go to kafka.dlq_topic)")
    command = getattr(ns, "command", "run")
    if command in ("evaluate", "fit", "demo") and getattr(ns, "emit_assignments", None):
        flag = flag_giving("emit_assignments", ns.emit_assignments)
        said.append(f"{flag} is read by noveld run only; noveld {command} emits no assignments")
    if command in ("evaluate", "demo") and getattr(ns, "exemplar_text", None) is not None:
        flag = flag_giving("exemplar_text", ns.exemplar_text)
        said.append(f"{flag} is read by noveld run only; noveld {command} keeps no state")
    if command == "evaluate" and getattr(ns, "namespace", None):
        said.append("--namespace names a state; noveld evaluate keeps none")
    if settings.kafka.bootstrap_servers is None:
        given = [f"--{d.replace('_', '-')}" for d in KAFKA_ONLY if getattr(ns, d, None)]
        if given:
            verb = "is" if len(given) == 1 else "are"
            said.append(f"{', '.join(given)} {verb} read in Kafka mode only (--kafka-bootstrap)")
    return said


def _ignored_model_flags(ns: argparse.Namespace, settings: Settings) -> list[str]:
    """Model flags given that the settings' model kind does not read."""
    m = settings.model
    kind = kind_of(m)
    said = []
    for key in restricted_settings():
        value = getattr(ns, key, None)
        if value is None or kind.reads(key):
            continue
        reader = readers(key)
        by_likelihood = "--likelihood" in reader and m.kind == "dpmm"  # else kind
        used = f"--likelihood {m.likelihood}" if by_likelihood else f"--model {m.kind}"
        said.append(f"{flag_giving(key, value)} is read by {reader} only; ignored with {used}")
    return said
