"""Reading what a namespace's keys hold, checked: a value noveld never writes there (a key of the
wrong kind, a count that is not one, JSON of the wrong shape) is named as damage, no traceback."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import numpy as np

from noveld.models.base import StatsDelta
from noveld.models.novelty_state import json_kind, state_problem
from noveld.models.stories import stories_problem
from noveld.models.story_table import StoryTable
from noveld.models.suffstats import MultinomialStats
from noveld.schema import StoredEvent
from noveld.state.base import FingerprintMismatch
from noveld.state.codec import CodecError, decode_checkpoint_arrays, decode_delta
from noveld.state.redis.keys import COMPACTED_SCHEMA, SCHEMA
from noveld.state.redis.reasons import StoreConflict
from noveld.state.redis.story_values import unpack_numbers
from noveld.state.stats_check import StatsCheck, delta_problem


def entry_events(fields: dict[bytes, bytes]) -> list[bytes]:
    """The events' JSON in one outbox entry, in order (also the one-event entries of earlier
    versions, fields ``id`` and ``event``)."""
    if b"event" in fields:
        return [fields[b"event"]]
    return [fields[k] for k in sorted((k for k in fields if k != b"w"), key=int)]


def text(v: Any) -> str:
    """A reply as text (Redis replies are bytes)."""
    return v.decode() if isinstance(v, bytes) else str(v)


def stream_entries(raw: list[Any]) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """XRANGE entries as (id, fields dict). A cluster client's transaction returns XRANGE
    unparsed (fields as a flat [k, v, …] list; redis-py 8.1), a plain client parsed."""
    out: list[tuple[bytes, dict[bytes, bytes]]] = []
    for entry_id, fields in raw:
        if isinstance(fields, list):
            fields = dict(zip(fields[::2], fields[1::2], strict=True))
        out.append((entry_id, fields))
    return out


def shown(raw: Any, limit: int = 40) -> str:
    """A stored value as a message quotes it: its text (bytes that are not UTF-8 escaped),
    cut to ``limit`` characters."""
    said = raw.decode(errors="backslashreplace") if isinstance(raw, bytes) else str(raw)
    return repr(said if len(said) <= limit else said[:limit] + "…")


def gone_hashes(raw: bytes | None, namespace: str) -> np.ndarray:
    """The ``vocab_gone`` key: sorted little-endian uint64 word hashes (none if absent)."""
    if raw is None:
        return np.zeros(0, np.uint64)
    if len(raw) % 8:
        raise StoreConflict(f"namespace {namespace!r}: its vocab_gone key is damaged")
    gone = np.frombuffer(raw, dtype="<u8").astype(np.uint64)
    if bool(np.any(gone[1:] <= gone[:-1])):
        raise StoreConflict(f"namespace {namespace!r}: its vocab_gone key is not sorted")
    return gone


class CheckpointCheck(StatsCheck):
    """The statistics checks of a Redis checkpoint: failures name the namespace's ckpt key."""

    def __init__(self, store: StoredValues) -> None:
        self.store = store

    def fail(self, field: str, what: str) -> NoReturn:
        raise self.store._damaged("ckpt", f"is damaged: {field} {what}")


class StoredValues:
    """The checks of a namespace's stored values; failures name the namespace and the key."""

    namespace: str

    def _damaged(self, key: str, what: str) -> StoreConflict:
        """A key of the namespace holds what noveld never writes there (exit 6, the key
        named: the operator restores the namespace or starts a new one)."""
        return StoreConflict(f"namespace {self.namespace!r}: key {key} {what}")

    def _str(self, key: str, raw: Any, what: str) -> str:
        """A stored name or value as text (``what`` of ``key``: not UTF-8 is damage)."""
        try:
            return text(raw)
        except UnicodeDecodeError:
            raise self._damaged(key, f"has {what} that is not UTF-8 ({shown(raw)})") from None

    def _count(self, key: str, field: str, raw: Any) -> int:
        """A stored non-negative integer (an offset, a counter, a sequence number)."""
        try:
            value = int(raw)
        except ValueError:
            value = -1
        if value < 0:
            raise self._damaged(
                key, f"field {field!r} is not a non-negative integer ({shown(raw)})"
            )
        return value

    def _counts(self, key: str, raw: dict[Any, Any]) -> dict[str, int]:
        """A hash of non-negative integers (offsets, counters, epochs, uid counters)."""
        out: dict[str, int] = {}
        for name, value in raw.items():
            field = self._str(key, name, "a field name")
            out[field] = self._count(key, field, value)
        return out

    def _fingerprint(self, meta: dict[str, str]) -> dict[str, Any]:
        """meta's model settings: a JSON object whose ``half_life_docs`` is a number."""
        try:
            stored = json.loads(meta["fingerprint"])
        except ValueError as exc:
            raise self._damaged("meta", f"field 'fingerprint' is not JSON ({exc})") from None
        if not isinstance(stored, dict):
            raise self._damaged(
                "meta", f"field 'fingerprint' is a JSON {json_kind(stored)}, not an object"
            )
        if json_kind(stored.get("half_life_docs", 0.0)) != "number":
            raise self._damaged(
                "meta", "field 'fingerprint' has a 'half_life_docs' that is not a number"
            )
        return stored

    def _novelty(self, raw: bytes | None) -> dict[str, Any]:
        """The novelty key's JSON (an empty object if absent)."""
        if not raw:
            return {}
        try:
            novelty = json.loads(raw)
        except ValueError as exc:
            raise self._damaged("novelty", f"is not JSON ({exc})") from None
        problem = state_problem(novelty)
        if problem is not None:
            where, what = problem
            entry = where.removeprefix("novelty").removeprefix(".")
            raise self._damaged("novelty", f"entry {entry} {what}" if entry else what)
        assert isinstance(novelty, dict)
        return novelty

    def _stories(self, numbers: dict[bytes, bytes], texts: dict[bytes, bytes]) -> StoryTable:
        """The stories hashes as a table: each cluster's packed numbers (story_values) and,
        where it has some, its terms and exemplars (the commit script's cjson writes an empty
        list as ``{}``)."""
        out: dict[str, Any] = {}
        text_of = {self._str("stories_text", k, "a field name"): v for k, v in texts.items()}
        for k, v in numbers.items():
            uid = self._str("stories", k, "a field name")
            try:
                extra = json.loads(text_of.get(uid, b"{}"))
            except ValueError as exc:
                raise self._damaged("stories_text", f"field {uid} is not JSON ({exc})") from None
            nums = unpack_numbers(v)
            if not (nums is not None and isinstance(extra, dict)):
                raise self._damaged("stories", f"field {uid} is not a story summary")
            terms, exemplars = extra.get("t", []), extra.get("e", [])
            out[uid] = {
                "born": nums[0], "last": nums[1], "docs": nums[2], "width": nums[3],
                "head": nums[4], "counts": nums[5:], "terms": [] if terms == {} else terms,
                "exemplars": [] if exemplars == {} else exemplars,
            }  # fmt: skip
        problem = stories_problem(out)
        if problem is not None:
            raise self._damaged("stories", f"{problem[0]} {problem[1]}")
        return StoryTable.from_json(out)

    def _vocabulary(self, raw: list[bytes]) -> list[str]:
        """The vocab list as words (the list can be long: one pass unless a word is bad)."""
        try:
            return [text(w) for w in raw]
        except UnicodeDecodeError:
            for i, w in enumerate(raw):
                self._str("vocab", w, f"a word at index {i}")
            raise

    def _uid_counters(self, raw: dict[Any, Any]) -> dict[str, int]:
        """The uidnext hash: uid slot number → next counter."""
        counters = self._counts("uidnext", raw)
        for slot in counters:
            if not (slot.isascii() and slot.isdigit()):
                raise self._damaged("uidnext", f"has a field {slot!r} that is not a uid slot")
        return counters

    def _decoded_checkpoint(
        self, blob: bytes, n_words: int, uidnext: dict[str, int]
    ) -> tuple[MultinomialStats, int]:
        """The checkpoint's statistics, checked (:class:`StatsCheck`: word ids against the
        vocabulary's ``n_words``, uids against the slots' counters), and its log position."""
        if not blob.startswith(b"PK"):  # an .npz is a zip archive
            raise self._damaged("ckpt", "is not a noveld checkpoint (not an .npz archive)")
        try:
            arrays, header = decode_checkpoint_arrays(blob)
        except CodecError as exc:  # numpy's reasons run on (its advice about allow_pickle)
            why = str(exc).split(". ", 1)[0]
            raise self._damaged("ckpt", f"is not a noveld checkpoint ({why})") from exc
        except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
            raise self._damaged(
                "ckpt", f"is not a noveld checkpoint (its arrays: {exc!r})"
            ) from exc
        at = header.get("seq") if isinstance(header, dict) else None
        if not isinstance(at, int) or isinstance(at, bool) or at < 0:
            raise self._damaged("ckpt", f"has no log position in its header ({shown(at)})")
        checked = CheckpointCheck(self).stats(arrays, n_words, uidnext)
        return MultinomialStats.from_arrays(checked), at

    def _delta(
        self, entry_id: Any, fields: dict[bytes, bytes], n_words: int | None = None
    ) -> StatsDelta:
        """A log entry's statistics delta, checked (:func:`delta_problem`; word ids against
        ``n_words`` when given)."""
        blob = fields.get(b"d")
        if blob is None:
            raise self._damaged("log", f"entry {text(entry_id)} has no field 'd'")
        try:
            delta = decode_delta(blob)
        except ValueError as exc:  # CodecError
            raise self._damaged(
                "log", f"entry {text(entry_id)} is not a noveld delta ({exc})"
            ) from exc
        self._check_delta(entry_id, delta, n_words)
        return delta

    def _check_delta(self, entry_id: Any, delta: StatsDelta, n_words: int | None) -> None:
        problem = delta_problem(delta, n_words)
        if problem is None:
            return
        field, what = problem
        top = int(delta.word_ids.max()) if delta.word_ids.shape[0] else -1
        if field == "word_ids" and n_words is not None and top >= n_words:
            raise StoreConflict(  # the vocabulary is the likelier loss (as in _check_whole)
                f"namespace {self.namespace!r} counts word ids up to {top} (log entry "
                f"{text(entry_id)}) but its vocabulary holds {n_words} words (its vocab key is "
                "gone or cut)"
            )
        raise self._damaged("log", f"entry {text(entry_id)}'s {field} {what}")

    def _event_texts(self, entry_id: Any, fields: dict[bytes, bytes]) -> list[bytes]:
        """An outbox entry's events (:func:`entry_events`)."""
        try:
            return entry_events(fields)
        except ValueError:  # a field name that is not an event's index
            raise self._damaged(
                "outbox", f"entry {text(entry_id)} has fields that are not event indices"
            ) from None

    def _stored_events(self, entry_id: Any, fields: dict[bytes, bytes]) -> list[StoredEvent]:
        """An outbox entry's events, parsed."""
        events = []
        for raw in self._event_texts(entry_id, fields):
            try:
                ev = StoredEvent.parse(raw)
            except (ValueError, TypeError):  # not JSON, not ASCII, not an object
                ev = None
            if ev is None or not isinstance(ev.get("event_id"), str):
                raise self._damaged(
                    "outbox",
                    f"entry {text(entry_id)} holds an event that is not one ({shown(raw)})",
                )
            events.append(ev)
        return events

    def _check_schema(self, meta: dict[str, str]) -> None:
        schema = self._count("meta", "schema", meta.get("schema", SCHEMA))
        if schema not in (SCHEMA, COMPACTED_SCHEMA):
            raise FingerprintMismatch(
                f"namespace {self.namespace!r} uses storage schema {meta.get('schema')}, this "
                f"noveld reads schemas {SCHEMA} and {COMPACTED_SCHEMA}; export it with the "
                "version that wrote it and import it"
            )
