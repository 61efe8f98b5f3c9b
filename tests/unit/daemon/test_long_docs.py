"""The long-document stage: documents past ``limits.max_doc_tokens`` are cut to exactly that
many tokens (as the featurizer counts them, from its own tokenizing pass) or dead-lettered,
never dropped silently."""

from __future__ import annotations

import pytest

from noveld.connectors.jsonl import Record
from noveld.daemon.settings import load_settings
from noveld.daemon.stages.decode import Rejections
from noveld.daemon.stages.long_docs import cut_text, limit_length
from noveld.daemon.stages.report import BatchReport
from noveld.featurize import TextViews, Tokenizer, read_texts
from noveld.schema import DecodedDocument, InvalidReason, SourcePosition


def _records(n: int) -> list[Record]:
    return [Record(raw=b"{}", position=SourcePosition(topic="f", partition=0, offset=i))
            for i in range(n)]  # fmt: skip


@pytest.mark.parametrize("min_len", [1, 3])
def test_a_cut_text_keeps_exactly_its_first_tokens(min_len: int) -> None:
    tok = Tokenizer(min_token_len=min_len)
    text = "The  Fed’s rate, a 0.5 % cut — don't panic! ok? " * 40
    full = tok.tokenize(text)
    for limit in (1, 7, 50, len(full) - 1):
        cut = cut_text(text, tok, limit)
        assert tok.tokenize(cut) == full[:limit] and text.startswith(cut)
    assert cut_text(text, tok, len(full)) == text


def test_long_documents_are_truncated_and_counted() -> None:
    tok = Tokenizer()
    docs = [
        DecodedDocument(id="short", text="a few words"),
        DecodedDocument(id="long", text="word " * 30),
        DecodedDocument(id="tokens", tokens=["Tok"] * 25),
    ]
    rep, rejects = BatchReport(), Rejections()
    read = read_texts(tok, None, docs)
    out, kept, views = limit_length(docs, _records(3), read, tok, 10, "truncate", rejects, rep)
    assert [d.id for d in out] == ["short", "long", "tokens"] and len(kept) == 3
    assert out[0] == docs[0]
    assert tok.tokenize(out[1].text or "") == ["word"] * 10
    assert out[2].tokens == ["tok"] * 10
    assert rep.truncated == 2 and rep.invalid == 0
    # the views are the featurizer's of the documents as they go on: the cut ones read again
    assert views[0] is read[0] and views == read_texts(tok, None, out)


def test_the_views_of_documents_within_the_limit_are_kept_as_read() -> None:
    """Read ahead with their vectors, documents within the limit keep them; a cut document's
    vector is left to the featurizer (it encodes the cut text)."""
    tok = Tokenizer()
    docs = [
        DecodedDocument(id="short", text="a few words"),
        DecodedDocument(id="long", text="word " * 30),
    ]
    read = [TextViews(tok.tokenize(d.text or "")) for d in docs]
    rep, rejects = BatchReport(), Rejections()
    _, _, views = limit_length(docs, _records(2), read, tok, 10, "truncate", rejects, rep)
    assert views[0] is read[0] and views[0].encoded
    assert views[1].tokens == ["word"] * 10 and not views[1].encoded


def test_long_documents_are_dead_lettered_when_asked() -> None:
    docs = [
        DecodedDocument(id="long", text="word " * 30),
        DecodedDocument(id="short", text="two words"),
    ]
    rep, rejects = BatchReport(), Rejections()
    read = read_texts(Tokenizer(), None, docs)
    out, kept, views = limit_length(
        docs, _records(2), read, Tokenizer(), 10, "dead-letter", rejects, rep
    )
    assert [d.id for d in out] == ["short"] and [r.position.offset for r in kept] == [1]
    assert views == [read[1]]
    assert rep.invalid == 1 and rep.truncated == 0
    assert rep.invalid_reasons == {InvalidReason.OVERSIZE.value: 1}
    assert rep.invalid_details["oversize"] == "30 tokens, more than limits.max_doc_tokens (10)"


def test_the_limits_default_to_admitting_full_articles() -> None:
    limits = load_settings(None, {}).limits
    assert limits.max_doc_bytes >= 64 * 1024 and limits.max_doc_tokens >= 10_000
    assert limits.oversize == "truncate"
    assert load_settings(None, {"limits": {"oversize": "dead-letter"}}).limits.oversize == (
        "dead-letter"
    )
