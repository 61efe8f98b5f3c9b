"""Tests of noveld.connectors.decode (and its parts decode_json, decode_fields): every DLQ
reason, lenient conversions, parser parity."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.connectors import decode_json
from noveld.connectors.decode import DecodeLimits, FieldNames, Invalid, decode_record
from noveld.schema import DecodedDocument, InvalidReason, format_rfc3339

F = FieldNames()
L = DecodeLimits()


@pytest.fixture(params=["stdlib", "orjson"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run a test once with the stdlib json path and once with the orjson fast path."""
    if request.param == "stdlib":
        monkeypatch.setattr(decode_json, "_orjson_loads", None)
    else:
        assert decode_json._orjson_loads is not None, "orjson is a runtime dependency"
    yield str(request.param)


def _dec(obj: Any, fields: FieldNames = F, limits: DecodeLimits = L) -> DecodedDocument | Invalid:
    raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return decode_record(raw, fields, limits)


def _reason(obj: Any, fields: FieldNames = F, limits: DecodeLimits = L) -> InvalidReason:
    out = _dec(obj, fields, limits)
    assert isinstance(out, Invalid), out
    assert out.detail  # always a human-readable message
    return out.reason


def _doc(obj: Any, fields: FieldNames = F, limits: DecodeLimits = L) -> DecodedDocument:
    out = _dec(obj, fields, limits)
    assert isinstance(out, DecodedDocument), out
    return out


def test_full_document(parser: str) -> None:
    doc = _doc(
        {
            "id": "d1",
            "text": "Quake hits city",
            "tokens": ["quake", "city"],
            "embedding": [0.5, -1, 2.0],
            "label": "world",
            "context": {"source": "ap"},
            "ts": "2024-01-01T00:00:00Z",
            "extra": {"ignored": [1, 2]},
        }
    )
    assert doc == DecodedDocument(
        id="d1",
        text="Quake hits city",
        tokens=["quake", "city"],
        embedding=[0.5, -1.0, 2.0],
        label="world",
        context={"source": "ap"},
        ts=1704067200.0,
    )


def test_undecodable(parser: str) -> None:
    assert _reason(b'{"id": "a", "text": "caf\xe9"}') == InvalidReason.UNDECODABLE
    assert _reason(b"\xff\xfe{}") == InvalidReason.UNDECODABLE
    assert _reason(b'{"id":"\xed\xa0\x80","text":"x"}') == InvalidReason.UNDECODABLE  # surrogate


@pytest.mark.parametrize(
    "raw",
    [b"", b"   ", b"{", b"nope", b'{"id": "a",}', b"{'id': 'a'}", b'{"id":"a"} {"id":"b"}'],
)
def test_not_json(parser: str, raw: bytes) -> None:
    assert _reason(raw) == InvalidReason.NOT_JSON


@pytest.mark.parametrize("raw", [b"[1, 2]", b'"text"', b"42", b"null", b"true"])
def test_not_object(parser: str, raw: bytes) -> None:
    assert _reason(raw) == InvalidReason.NOT_OBJECT


def test_missing_id(parser: str) -> None:
    assert _reason({"text": "x"}) == InvalidReason.MISSING_ID
    assert _reason({"id": None, "text": "x"}) == InvalidReason.MISSING_ID


@pytest.mark.parametrize("bad", [True, 1.5, [], {}, "", "x" * 257])
def test_bad_id(parser: str, bad: Any) -> None:
    assert _reason({"id": bad, "text": "x"}) == InvalidReason.BAD_ID


def test_id_boundaries_and_integer_ids(parser: str) -> None:
    assert _doc({"id": "é" * 256, "text": "x"}).id == "é" * 256  # characters, not bytes
    assert _doc({"id": 17, "text": "x"}).id == "17"
    assert _doc({"id": -3, "text": "x"}).id == "-3"
    big = 123456789012345678901234567890
    assert _doc(b'{"id": %d, "text": "x"}' % big).id == str(big)


@pytest.mark.parametrize(
    "fields",
    [
        {"text": 5},
        {"text": ["a"]},
        {"tokens": "a b"},
        {"tokens": ["a", 1]},
        {"tokens": ["a", None]},
        {"embedding": "0.1 0.2"},
        {"embedding": [0.1, "0.2"]},
        {"embedding": [True, 0.2]},
        {"embedding": [[0.1]]},
        {"text": "x", "label": 1.5},
        {"text": "x", "label": True},
        {"text": "x", "label": ["a"]},
        {"text": "x", "context": ["a"]},
        {"text": "x", "context": {"nested": {"a": "b"}}},
        {"text": "x", "context": {"list": ["a"]}},
        {"text": "x", "context": {"a\x1fb": "c"}},  # the context vocabulary's separator
        {"text": "x", "context": {"line\n": "c"}},
        {"text": "x", "ts": "yesterday"},
        {"text": "x", "ts": "2024-02-30T00:00:00Z"},
        {"text": "x", "ts": True},
        {"text": "x", "ts": [1]},
        {"text": "x", "ts": 1e15},  # finite, but no RFC 3339 time: events could not carry it
        {"text": "x", "ts": 253402300800},
        {"text": "x", "ts": -1e20},
        {"text": "x", "ts": "0001-01-01T00:00:00+05:00"},  # before year 1 in UTC
    ],
)
def test_bad_field(parser: str, fields: dict[str, Any]) -> None:
    assert _reason({"id": "a", **fields}) == InvalidReason.BAD_FIELD


def test_no_content(parser: str) -> None:
    assert _reason({"id": "a"}) == InvalidReason.NO_CONTENT
    assert _reason({"id": "a", "text": None, "tokens": None, "label": "x"}) == (
        InvalidReason.NO_CONTENT
    )


def test_empty_content_is_left_to_the_featurizer(parser: str) -> None:
    assert _doc({"id": "a", "text": ""}).text == ""
    assert _doc({"id": "a", "tokens": []}).tokens == []


def test_oversize_boundary(parser: str) -> None:
    raw = json.dumps({"id": "a", "text": "x" * 100}).encode()
    assert isinstance(decode_record(raw, F, DecodeLimits(max_doc_bytes=len(raw))), DecodedDocument)
    out = decode_record(raw, F, DecodeLimits(max_doc_bytes=len(raw) - 1))
    assert isinstance(out, Invalid) and out.reason == InvalidReason.OVERSIZE
    # size is checked before anything else, even for garbage
    assert _reason(b"\xff" * 20, limits=DecodeLimits(max_doc_bytes=10)) == InvalidReason.OVERSIZE


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id": "a", "embedding": [0.1, NaN]}',
        b'{"id": "a", "embedding": [Infinity]}',
        b'{"id": "a", "embedding": [-Infinity, 1]}',
        b'{"id": "a", "embedding": [1e400]}',
        b'{"id": "a", "embedding": [1%s]}' % (b"0" * 400),
    ],
)
def test_nan_embedding(parser: str, raw: bytes) -> None:
    assert _reason(raw) == InvalidReason.NAN_EMBEDDING


def test_wrong_dimension(parser: str) -> None:
    lim = DecodeLimits(embedding_dim=3)
    assert _doc({"id": "a", "embedding": [1, 2, 3]}, limits=lim).embedding == [1.0, 2.0, 3.0]
    assert _reason({"id": "a", "embedding": [1, 2]}, limits=lim) == InvalidReason.WRONG_DIMENSION
    assert _reason({"id": "a", "embedding": [1, 2, 3, 4]}, limits=lim) == (
        InvalidReason.WRONG_DIMENSION
    )
    assert _reason({"id": "a", "embedding": []}) == InvalidReason.WRONG_DIMENSION
    assert _doc({"id": "a", "embedding": [1] * 7}).embedding == [1.0] * 7  # any dim if unset


def test_nan_literal_outside_embedding(parser: str) -> None:
    assert _reason(b'{"id": "a", "text": "x", "ts": NaN}') == InvalidReason.BAD_FIELD
    assert _reason(b'{"id": "a", "text": "x", "context": {"k": Infinity}}') == (
        InvalidReason.BAD_FIELD
    )
    # a NaN in a field we ignore is still accepted by json; both parsers agree
    assert _doc(b'{"id": "a", "text": "x", "other": NaN}').id == "a"


def test_lenient_conversions(parser: str) -> None:
    doc = _doc(
        {
            "id": "a",
            "text": "x",
            "label": 7,
            "context": {"s": "ap", "n": 3, "f": 1.5, "t": True, "b": False, "z": None},
            "ts": 1700000000,
        }
    )
    assert doc.label == "7"
    assert doc.context == {"s": "ap", "n": "3", "f": "1.5", "t": "true", "b": "false"}
    assert doc.ts == 1700000000.0
    assert _doc({"id": "a", "text": "x", "label": None, "context": None}).context == {}
    assert _doc({"id": "a", "text": "x", "ts": 1.5}).ts == 1.5


def test_rfc3339_ts(parser: str) -> None:
    assert _doc({"id": "a", "text": "x", "ts": "1970-01-01T01:00:00+01:00"}).ts == 0.0


def test_utf8_bom_is_ignored(parser: str) -> None:
    assert _doc(b'\xef\xbb\xbf{"id": "a", "text": "x"}').id == "a"


def test_unicode_and_surrogates(parser: str) -> None:
    assert _doc(b'{"id": "a", "text": "caf\\u00e9 \\ud83d\\ude00"}').text == "café 😀"
    assert _doc({"id": "日本", "text": "東京"}).id == "日本"
    assert _reason(b'{"id": "a", "text": "\\ud800"}') == InvalidReason.NOT_JSON
    assert _reason(b'{"id": "a", "text": "x", "o": {"\\udfff": 1}}') == InvalidReason.NOT_JSON


def test_nesting_limit(parser: str) -> None:
    def nested(depth: int) -> bytes:
        # the document object itself is level 1
        inner = b"[" * (depth - 1) + b"]" * (depth - 1)
        return b'{"id": "a", "text": "x", "deep": %s}' % inner

    assert _doc(nested(decode_json.MAX_DEPTH)).id == "a"
    assert _reason(nested(decode_json.MAX_DEPTH + 1)) == InvalidReason.NOT_JSON
    for depth in (990, 1000, 1020, 5000):  # around both parsers' own recursion limits
        assert _reason(nested(depth)) == InvalidReason.NOT_JSON
    # many brackets inside strings are not nesting
    assert _doc({"id": "a", "text": "[" * 500}).text == "[" * 500


def test_field_name_mapping(parser: str) -> None:
    names = FieldNames(
        id="doc_id",
        text="body",
        tokens="toks",
        embedding="vec",
        label="category",
        context="meta",
        ts="time",
    )
    doc = _doc(
        {
            "doc_id": "x1",
            "body": "hello",
            "toks": ["hello"],
            "vec": [1.0],
            "category": "c",
            "meta": {"k": "v"},
            "time": 5,
            # the default names mean nothing under this mapping
            "id": "wrong",
            "text": "wrong",
            "label": "wrong",
        },
        fields=names,
    )
    assert doc == DecodedDocument(
        id="x1",
        text="hello",
        tokens=["hello"],
        embedding=[1.0],
        label="c",
        context={"k": "v"},
        ts=5.0,
    )
    assert _reason({"id": "a", "text": "x"}, fields=names) == InvalidReason.MISSING_ID
    assert _reason({"doc_id": "a", "text": "x"}, fields=names) == InvalidReason.NO_CONTENT


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise(raw: bytes) -> None:
    out = decode_record(raw, F, DecodeLimits(max_doc_bytes=200, embedding_dim=2))
    assert isinstance(out, DecodedDocument | Invalid)
    if isinstance(out, Invalid):
        assert isinstance(out.reason, InvalidReason)


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)
_field_names = st.sampled_from(["id", "text", "tokens", "embedding", "label", "context", "ts"])
_objects = st.dictionaries(_field_names | st.text(max_size=3), _values, max_size=8)


def _with_both_parsers(raw: bytes) -> tuple[DecodedDocument | Invalid, DecodedDocument | Invalid]:
    saved = decode_json._orjson_loads
    try:
        decode_json._orjson_loads = None
        via_json = decode_record(raw, F, DecodeLimits(embedding_dim=2))
    finally:
        decode_json._orjson_loads = saved
    return via_json, decode_record(raw, F, DecodeLimits(embedding_dim=2))


@settings(max_examples=400, deadline=None)
@given(_objects)
def test_json_objects_never_raise_and_parsers_agree(obj: dict[str, Any]) -> None:
    raw = json.dumps(obj).encode()  # may contain NaN/Infinity literals and huge integers
    via_json, via_default = _with_both_parsers(raw)
    assert via_json == via_default
    if isinstance(via_json, DecodedDocument):
        assert via_json.id == (obj["id"] if isinstance(obj["id"], str) else str(obj["id"]))
        assert all(math.isfinite(x) for x in via_json.embedding or [])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet='{}[]",:0123456789.eE-+ \\u d8aftrnNIy', max_size=40))
def test_json_like_text_parsers_agree(text: str) -> None:
    via_json, via_default = _with_both_parsers(text.encode())
    assert via_json == via_default


@given(
    st.dictionaries(
        st.sampled_from(["id", "text", "tokens", "label", "context", "ts", "embedding", "x"]),
        st.one_of(
            st.none(),
            st.integers(-5, 10**6),
            st.floats(allow_nan=False, width=32),
            st.text(max_size=20),
            st.lists(st.text(max_size=5), max_size=4),
            st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=3),
        ),
    )
)
def test_decoded_documents_pass_full_model_validation(obj: dict[str, object]) -> None:
    """The decoder builds documents without pydantic; what it accepts must be a valid Document
    with the same fields."""
    out = decode_record(json.dumps(obj).encode(), FieldNames(), DecodeLimits())
    if isinstance(out, DecodedDocument):
        assert DecodedDocument.of(out.validated()) == out


def test_ts_at_the_ends_of_the_rfc3339_range_is_kept(parser: str) -> None:
    assert _doc({"id": "a", "text": "x", "ts": -62135596800}).ts == -62135596800.0
    assert _doc({"id": "a", "text": "x", "ts": "9999-12-31T23:59:59Z"}).ts == 253402300799.0
    # the last microsecond of 9999 rounds to year 10000 as a double: kept in 9999
    last = _doc({"id": "a", "text": "x", "ts": "9999-12-31T23:59:59.999999+00:00"}).ts
    assert last is not None and format_rfc3339(last) == "9999-12-31T23:59:59.999Z"
    bad = _dec({"id": "a", "text": "x", "ts": "9999-12-31T23:30:00-01:00"})
    assert isinstance(bad, Invalid)  # 10000-01-01T00:30Z


@pytest.mark.parametrize("raw", [b"", b"  \r", b"\t"])
def test_an_empty_record_is_named_as_such(raw: bytes, parser: str) -> None:
    """A Kafka tombstone (no value) or a blank record is dead-lettered saying it was empty, not
    with a JSON parser's "Expecting value: line 1 column 1"."""
    out = _dec(raw)
    assert isinstance(out, Invalid) and out.reason is InvalidReason.NOT_JSON
    assert "empty record" in out.detail and "tombstone" in out.detail


def test_label_and_context_rejections_say_what_is_accepted(parser: str) -> None:
    """The detail names what the field takes: an integer label is accepted, so "must be a
    string" misled; a context value that is a number fails for being non-finite, not a number."""
    label = _dec({"id": "a", "text": "x", "label": 7.5})
    assert isinstance(label, Invalid)
    assert label.detail == "'label' must be a string, an integer or null, got the number 7.5"
    nan = _dec(b'{"id": "a", "text": "x", "context": {"source": NaN}}')
    assert isinstance(nan, Invalid) and nan.detail == "'context'.'source' is not finite (nan)"
    nested = _dec({"id": "a", "text": "x", "context": {"source": ["ap"]}})
    assert isinstance(nested, Invalid)
    assert nested.detail == (
        "'context'.'source' must be a string, number, boolean or null, got array"
    )


def test_a_scalar_context_field_is_one_context_field(parser: str) -> None:
    """Flat records carry their context in scalar fields: each is one context field, named
    after it (a scalar ``context`` was dead-lettered as ``bad_field``)."""
    flat = FieldNames(context=("category", "source", "meta"))
    doc = _doc(
        {"id": "a", "text": "x", "category": "Natural/Earthquake", "source": 3,
         "meta": {"lang": "en", "wire": True}},
        flat,
    )  # fmt: skip
    assert doc.context == {"category": "Natural/Earthquake", "source": "3", "lang": "en",
                           "wire": "true"}  # fmt: skip
    assert _doc({"id": "a", "text": "x", "category": None}, flat).context == {}
    assert _doc({"id": "a", "text": "x", "context": "source=ap"}).context == {
        "context": "source=ap"
    }
    assert FieldNames(context=["a", "b"]).context == ("a", "b")  # type: ignore[arg-type]


def test_a_context_field_of_another_shape_says_what_is_accepted(parser: str) -> None:
    flat = FieldNames(context=("category",))
    out = _dec({"id": "a", "text": "x", "category": ["Natural"]}, flat)
    assert isinstance(out, Invalid) and out.reason == InvalidReason.BAD_FIELD
    assert out.detail == (
        "'category' must be an object (of context fields) or a string, number or boolean "
        "(one context field), got array"
    )
    nan = _dec(b'{"id": "a", "text": "x", "category": NaN}', flat)
    assert isinstance(nan, Invalid) and nan.detail == "'category' is not finite (nan)"
