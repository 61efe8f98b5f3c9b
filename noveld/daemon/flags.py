"""Command-line flags declared once, each beside the setting it sets: the parser is built from
these declarations and the given flags are read back from them as settings overrides."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Flag:
    """One flag: its names, the setting it sets (dotted, ``batch.max_docs``; None when the
    command reads the flag itself) and its argparse options."""

    names: tuple[str, ...]
    setting: str | None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The flag as messages name it (its first long name)."""
        return next(n for n in self.names if n.startswith("--"))

    @property
    def dest(self) -> str:
        """The argparse destination, as argparse derives it."""
        return str(self.options.get("dest") or self.name[2:].replace("-", "_"))

    def gives(self, value: Any) -> bool:
        """Whether this flag, given, stores ``value`` (one of an exclusive pair's flags)."""
        action = self.options.get("action")
        if action == "store_const":
            return bool(self.options["const"] == value)
        if action == "store_false":
            return value is False
        if action == "store_true":
            return value is True
        return True

    def add_to(self, parser: argparse.ArgumentParser | argparse._ActionsContainer) -> None:
        """Add the flag to a parser or an argument group."""
        parser.add_argument(*self.names, **self.options)


def flag(*names: str, setting: str | None = None, **options: Any) -> Flag:
    """A :class:`Flag`: ``flag("--batch-size", setting="batch.max_docs", type=int, help=…)``."""
    return Flag(names, setting, options)


@dataclass(frozen=True)
class Exclusive:
    """Flags of which at most one may be given (argparse's mutually exclusive group)."""

    flags: tuple[Flag, ...]


Entry = Flag | Exclusive


@dataclass(frozen=True)
class Group:
    """Flags shown together under a title in ``--help`` (no title: the parser's own list)."""

    title: str | None
    entries: tuple[Entry, ...]


def add_groups(parser: argparse.ArgumentParser, groups: Iterable[Group]) -> None:
    """Add every group's flags, in order, to ``parser``."""
    for group in groups:
        target = parser if group.title is None else parser.add_argument_group(group.title)
        add_entries(target, group.entries)


def add_entries(target: argparse._ActionsContainer, entries: Iterable[Entry]) -> None:
    """Add flags (and exclusive sets of flags) to a parser or an argument group."""
    for entry in entries:
        if isinstance(entry, Exclusive):
            exclusive = target.add_mutually_exclusive_group()
            for f in entry.flags:
                f.add_to(exclusive)
        else:
            entry.add_to(target)


def flags_of(entries: Iterable[Entry | Group]) -> Iterator[Flag]:
    """Every flag of these groups and entries, in declaration order."""
    for entry in entries:
        if isinstance(entry, Group):
            yield from flags_of(entry.entries)
        elif isinstance(entry, Exclusive):
            yield from entry.flags
        else:
            yield entry


def overrides(ns: argparse.Namespace, flags: Iterable[Flag]) -> dict[str, Any]:
    """The settings the given flags set, as a nested dict (flags not given are left out)."""
    out: dict[str, Any] = {}
    for f in flags:
        value = getattr(ns, f.dest, None)
        if f.setting is None or value is None:
            continue
        *sections, key = f.setting.split(".")
        target = out
        for section in sections:
            target = target.setdefault(section, {})
        target[key] = value
    return out
