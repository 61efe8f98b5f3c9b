"""Tests of noveld.featurize: tokenizer, vocabulary, DocBatch construction, empty content."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.featurize import (
    Featurizer,
    Tokenizer,
    batch_from_flat,
    build_batch,
    unit_embedding,
)
from noveld.featurize import words as words_module
from noveld.models.base import DocBatch
from noveld.models.vocabulary import Vocabulary, context_tokens
from noveld.schema import DecodedDocument


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Quake hits City!", ["quake", "hits", "city"]),
        ("  multiple   spaces\tand\nnewlines ", ["multiple", "spaces", "and", "newlines"]),
        ("don't O’Neill rock'n'roll", ["don't", "o'neill", "rock'n'roll"]),
        ("'quoted' trailing' 'leading", ["quoted", "trailing", "leading"]),
        ("snake_case_word", ["snake", "case", "word"]),
        ("covid-19 in 2020, 3.5%", ["covid", "19", "in", "2020", "3", "5"]),
        ("Café Zürich ÉCOLE", ["café", "zürich", "école"]),
        ("Москва и Киев", ["москва", "и", "киев"]),
        ("東京 2024", ["東京", "2024"]),
        ("", []),
        ("!!! ... ---", []),
    ],
)
def test_tokenize(text: str, expected: list[str]) -> None:
    assert Tokenizer().tokenize(text) == expected


def test_tokenizer_options() -> None:
    assert Tokenizer(lowercase=False).tokenize("Hello World") == ["Hello", "World"]
    assert Tokenizer(min_token_len=3).tokenize("a an the quake") == ["the", "quake"]
    assert Tokenizer(pattern=r"\S+").tokenize("Hi, there!") == ["hi,", "there!"]


def test_tokenizer_is_frozen_and_comparable() -> None:
    tok = Tokenizer()
    with pytest.raises(AttributeError):
        tok.lowercase = False  # type: ignore[misc]
    assert tok == Tokenizer()
    assert tok != Tokenizer(min_token_len=2)


def test_normalize_pretokenized() -> None:
    tok = Tokenizer(min_token_len=2)
    assert tok.normalize(["Don’t", "A", "", "New York"]) == ["don't", "new york"]
    assert Tokenizer(lowercase=False).normalize(["Ab", ""]) == ["Ab"]


def test_vocabulary_grows_in_first_seen_order() -> None:
    v = Vocabulary()
    assert len(v) == 0
    assert v.ids(["b", "a", "b", "c"]) == [0, 1, 0, 2]
    assert v.ids(["c", "d", "a", "d"]) == [2, 3, 1, 3]
    assert len(v) == 4
    assert [v.word(i) for i in range(4)] == ["b", "a", "c", "d"]
    assert v.to_list() == ["b", "a", "c", "d"]
    assert "a" in v and "z" not in v
    assert v.get("d") == 3 and v.get("z") is None


def test_vocabulary_without_growth_drops_unknown() -> None:
    v = Vocabulary.from_list(["x", "y"])
    assert v.ids(["y", "new", "x"], grow=False) == [1, 0]
    assert len(v) == 2
    assert v.ids([]) == []


def test_vocabulary_round_trip_and_errors() -> None:
    v = Vocabulary()
    v.ids(["one", "two", "three"])
    copy = Vocabulary.from_list(v.to_list())
    assert copy.to_list() == v.to_list()
    assert copy.ids(["three", "four"]) == [2, 3]
    snapshot = v.to_list()
    snapshot.append("mutated")
    assert len(v) == 3  # to_list returns a copy
    with pytest.raises(ValueError):
        Vocabulary.from_list(["a", "b", "a"])
    with pytest.raises(IndexError):
        v.word(3)
    with pytest.raises(IndexError):
        v.word(-1)


@given(st.lists(st.lists(st.text(alphabet="abcde", min_size=1, max_size=2), max_size=6)))
def test_vocabulary_ids_are_consistent(token_lists: list[list[str]]) -> None:
    v = Vocabulary()
    for toks in token_lists:
        ids = v.ids(toks)
        assert [v.word(i) for i in ids] == toks
    words = v.to_list()
    assert len(set(words)) == len(words) == len(v)
    assert set(words) == {t for toks in token_lists for t in toks}


def _assert_same_batch(a: DocBatch, b: DocBatch) -> None:
    for name in ("ptr", "words", "counts", "lengths"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype == np.int64, name
        np.testing.assert_array_equal(x, y, err_msg=name)
    assert a.vocab_size == b.vocab_size


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=12), max_size=10))
def test_build_batch_matches_from_docs(docs: list[list[int]]) -> None:
    _assert_same_batch(build_batch(docs, 31), DocBatch.from_docs(docs, 31))


def test_batch_from_flat_empty_and_stride() -> None:
    empty = batch_from_flat(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), 5)
    assert len(empty) == 0 and empty.nnz == 0 and empty.ptr.tolist() == [0]
    # ids beyond the stated vocab size still round-trip (stride grows)
    b = batch_from_flat(np.array([7, 7, 1]), np.array([2, 1]), 3)
    assert b.doc(0)[0].tolist() == [7] and b.doc(0)[1].tolist() == [2]
    assert b.doc(1)[0].tolist() == [1]


def _featurizer() -> Featurizer:
    return Featurizer(Tokenizer(), Vocabulary())


def test_featurize_counts() -> None:
    f = _featurizer()
    docs = [
        DecodedDocument(id="1", text="Quake quake hits the city"),
        DecodedDocument(id="2", text="The city sleeps"),
        DecodedDocument(id="3", tokens=["Quake", "aftershock", "quake"], text="ignored words here"),
    ]
    batch, empty = f.featurize(docs)
    assert empty == []
    assert len(batch) == 3
    assert batch.vocab_size == len(f.vocabulary) == 6  # quake hits the city sleeps aftershock
    assert "ignored" not in f.vocabulary  # tokens win over text
    assert batch.lengths.tolist() == [5, 3, 3]
    for d, doc in enumerate(docs):
        words, counts = batch.doc(d)
        got = {f.vocabulary.word(int(w)): int(c) for w, c in zip(words, counts, strict=True)}
        assert got == Counter(f.tokens_of(doc))
        assert list(words) == sorted(words)
    assert batch.nnz == 4 + 3 + 2
    assert int(batch.counts.sum()) == int(batch.lengths.sum())


def test_featurize_reports_empty_content() -> None:
    f = _featurizer()
    docs = [
        DecodedDocument(id="0", text="!!!"),
        DecodedDocument(id="1", text="real words"),
        DecodedDocument(id="2", text=""),
        DecodedDocument(id="3", tokens=[]),
        DecodedDocument(id="4", tokens=["", ""]),
        DecodedDocument(id="5", embedding=[0.1, 0.2]),  # no token content for a word model
        DecodedDocument(id="6", tokens=["word"], text=""),
    ]
    batch, empty = f.featurize(docs)
    assert empty == [0, 2, 3, 4, 5]
    assert len(batch) == 2
    assert batch.lengths.tolist() == [2, 1]
    assert f.vocabulary.to_list() == ["real", "words", "word"]


def test_featurize_all_empty_and_no_docs() -> None:
    f = _featurizer()
    batch, empty = f.featurize([DecodedDocument(id="0", text="...")])
    assert empty == [0] and len(batch) == 0 and batch.ptr.tolist() == [0]
    batch, empty = f.featurize([])
    assert empty == [] and len(batch) == 0


def test_featurize_without_growth() -> None:
    f = Featurizer(Tokenizer(), Vocabulary.from_list(["quake", "city"]))
    docs = [
        DecodedDocument(id="0", text="quake in the city"),
        DecodedDocument(id="1", text="unknown words only"),
        DecodedDocument(id="2", text="city city"),
        DecodedDocument(id="3", text=""),
    ]
    batch, empty = f.featurize(docs, grow=False)
    assert empty == [1, 3]
    assert len(f.vocabulary) == 2
    assert batch.lengths.tolist() == [2, 2]
    assert batch.doc(0)[0].tolist() == [0, 1]
    assert batch.doc(1)[0].tolist() == [1] and batch.doc(1)[1].tolist() == [2]


def test_featurize_is_deterministic_across_batches() -> None:
    texts = ["alpha beta", "beta gamma delta", "alpha alpha epsilon", "zeta"]
    docs = [DecodedDocument(id=str(i), text=t) for i, t in enumerate(texts)]
    one, two = _featurizer(), _featurizer()
    one.featurize(docs)
    two.featurize(docs[:1])
    two.featurize(docs[1:])
    assert one.vocabulary.to_list() == two.vocabulary.to_list()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet="ab c.D", max_size=15), max_size=12), st.sampled_from([3, 65_536]))
def test_featurize_matches_per_document_reference(texts: list[str], run: int) -> None:
    """The same batch whether a batch's tokens become ids in one run or in many (``_ID_RUN``,
    which bounds the strings a batch of long documents holds)."""
    f = _featurizer()
    docs = [DecodedDocument(id=str(i), text=t) for i, t in enumerate(texts)]
    default, words_module._ID_RUN = words_module._ID_RUN, run
    try:
        batch, empty = f.featurize(docs)
    finally:
        words_module._ID_RUN = default
    ref_vocab = Vocabulary()
    tok = Tokenizer()
    ids = [ref_vocab.ids(tok.tokenize(t)) for t in texts]
    assert empty == [i for i, x in enumerate(ids) if not x]
    _assert_same_batch(batch, DocBatch.from_docs([x for x in ids if x], len(ref_vocab)))


def test_context_fields_become_reserved_entries_with_field_cardinalities() -> None:
    vocab = Vocabulary()
    feat = Featurizer(Tokenizer(), vocab, context=True)
    docs = [
        DecodedDocument(id="a", text="quake hits", context={"source": "ap", "section": "world"}),
        DecodedDocument(id="b", text="no content words ..."),
        DecodedDocument(id="c", text="!!!", context={"source": "x"}),  # empty: not in the batch
        DecodedDocument(id="d", text="quake again", context={"source": "reuters"}),
    ]
    batch, empty = feat.featurize(docs)
    assert empty == [2]
    assert batch.ctx_ptr is not None and batch.ctx_ptr.tolist() == [0, 2, 2, 3]
    assert batch.ctx_value is not None and batch.ctx_field is not None
    names = [vocab.word(int(i)) for i in batch.ctx_value]
    assert names == [  # fields in name order, values after the batch's words
        context_tokens("section", "world")[0],
        context_tokens("source", "ap")[0],
        context_tokens("source", "reuters")[0],
    ]
    assert [vocab.word(int(i)) for i in batch.ctx_field] == [
        context_tokens("section", "world")[1],
        context_tokens("source", "ap")[1],
        context_tokens("source", "ap")[1],
    ]
    assert batch.ctx_card is not None and batch.ctx_card.tolist() == [1.0, 2.0, 2.0]
    assert vocab.reserved == 5 and batch.reserved == 5  # 3 values + 2 fields
    assert batch.n_words == len(vocab) - 5 == 6
    assert vocab.context_values("source") == 2 and vocab.context_values("nope") == 0
    again = Vocabulary.from_list(vocab.to_list())
    assert again.reserved == 5 and again.context_values("source") == 2
    again.truncate(len(vocab) - 1)  # the last entry added was the "source" field's
    assert again.reserved == 4
    seen, _ = Featurizer(Tokenizer(), vocab, context=True).featurize(
        [DecodedDocument(id="e", text="quake", context={"source": "new-one", "section": "world"})],
        grow=False,
    )  # read-only: an unseen value is dropped, a known one kept
    assert seen.ctx_value is not None
    assert [vocab.word(int(i)) for i in seen.ctx_value] == [context_tokens("section", "world")[0]]


def test_featurizer_ignores_context_unless_asked() -> None:
    vocab = Vocabulary()
    batch, _ = Featurizer(Tokenizer(), vocab).featurize(
        [DecodedDocument(id="a", text="quake hits", context={"source": "ap"})]
    )
    assert batch.ctx_ptr is None and vocab.reserved == 0 and len(vocab) == 2


@pytest.mark.parametrize(
    "embedding", [[1e-200, 1e-200, 0.0, 0.0], [1e308, 1e308, 1e308, 1e308], [3.0, 4.0, 0.0, 0.0]]
)
def test_an_embedding_of_tiny_or_huge_entries_has_its_direction(embedding: list[float]) -> None:
    """Its norm under- or overflows, but it is no zero vector: scaled first, then normed."""
    x = unit_embedding(DecodedDocument(id="e", embedding=embedding))
    assert x is not None
    expected = np.asarray(embedding) / np.abs(embedding).max()
    np.testing.assert_allclose(x, expected / np.linalg.norm(expected), rtol=1e-15)


def test_a_zero_embedding_has_no_direction() -> None:
    assert unit_embedding(DecodedDocument(id="z", embedding=[0.0, 0.0, 0.0])) is None
