"""A file read one batch ahead (noveld.daemon.lookahead) looks to the loop exactly like the
file read in turn: the same batches, positions, checksums and end; and a featurizer given its
documents' text views computed ahead (noveld.featurize.read_texts) makes the same batch."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from noveld.connectors.jsonl import JsonlSource, Record
from noveld.daemon.lookahead import Lookahead, read_ahead
from noveld.daemon.stages.prefetch import Prefetched, Prepared
from noveld.featurize import Featurizer, TextViews, Tokenizer, read_texts
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument


def _lines(n: int) -> list[str]:
    """Records with blank lines between some of them, and an unfinished last line."""
    out = []
    for i in range(n):
        out.append(json.dumps({"id": str(i), "text": f"word{i % 7} other"}) + "\n")
        if i % 5 == 4:
            out.append("\n   \n")
    return [*out, '{"id": "tail", "te']


def _walk(source: JsonlSource | Lookahead, max_docs: int) -> list[tuple[object, ...]]:
    """What the loop sees of a source, batch by batch, acknowledging each."""
    seen: list[tuple[object, ...]] = []
    while True:
        records = source.read_batch(max_docs, 0)
        if not records:
            break
        first, nxt = source.positions(records)
        (end,) = nxt.values()
        seen.append(
            (
                [r.raw for r in records],
                first,
                nxt,
                source.checksum_at(end),
                source.next_offset,
            )
        )
        source.acknowledge(nxt)
    seen.append((source.exhausted, source.held_tail, source.next_offset, source.held_tail_bytes))
    return seen


def _prepare(records: Sequence[Record]) -> Prepared:
    return Prepared([])


def test_a_file_read_ahead_gives_the_same_batches_positions_and_checksums(
    tmp_path: Path,
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(_lines(23)))
    for start, max_docs in ((0, 4), (3, 5), (0, 23), (7, 100)):
        plain = JsonlSource(str(path), start_offset=start)
        inner = JsonlSource(str(path), start_offset=start)
        ahead = Lookahead(inner, _prepare)
        try:
            expected = _walk(plain, max_docs)
            assert _walk(ahead, max_docs) == expected
            assert expected[-1][:2] == (True, True)  # read to the end; the tail held
            # the checksums of the lines committed are forgotten as they are without it
            assert len(inner._crcs) == len(plain._crcs) <= 1
        finally:
            plain.close()
            ahead.close()


def test_every_batch_is_prepared_ahead_in_order(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(_lines(10)))
    prepared: list[list[bytes]] = []

    def prepare(records: Sequence[Record]) -> Prepared:
        prepared.append([r.raw for r in records])
        return Prepared([])

    source = Lookahead(JsonlSource(str(path)), prepare)
    batches = []
    while records := source.read_batch(3, 0):
        assert isinstance(records, Prefetched)
        records.ahead.result()
        batches.append([r.raw for r in records])
    source.close()
    assert prepared == batches and len(batches) == 4


def test_only_a_regular_file_is_read_ahead(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text("".join(_lines(3)))
    source = JsonlSource(str(path))
    assert isinstance(read_ahead(source, True, _prepare), Lookahead)
    assert read_ahead(source, False, _prepare) is source
    source.close()


class _Encoder:
    """A stand-in encoder: a vector from the text's length, none for blank text."""

    model_id = "test@4"
    dimension = 4

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        out = np.array([[len(t), 1.0, -2.0, 0.5] for t in texts], dtype=np.float64)
        has = np.array([bool(t.strip()) for t in texts])
        out[~has] = 0.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.divide(out, norms, out=np.zeros_like(out), where=norms > 0), has


def test_a_featurizer_given_views_read_ahead_makes_the_same_batch() -> None:
    docs = [
        DecodedDocument(id="a", text="Markets fell sharply"),
        DecodedDocument(id="b", text="   "),
        DecodedDocument(id="c", tokens=["Rates", "rose"]),
        DecodedDocument(id="d", text="own vector", embedding=[0.0, 3.0, 0.0, 4.0]),
        DecodedDocument(id="e", embedding=[1.0, 0.0, 0.0, 0.0]),
        DecodedDocument(id="f", text="!!!"),
    ]
    tokenizer, encoder = Tokenizer(), _Encoder()

    def featurizer() -> Featurizer:
        return Featurizer(
            tokenizer, Vocabulary(), embedding_dim=4, encoder=encoder, words_view=True
        )

    plain, empty = featurizer().featurize(docs)
    ahead, empty_ahead = featurizer().featurize(docs, read=read_texts(tokenizer, encoder, docs))
    assert empty_ahead == empty == [1, 5]  # "!!!" has an encoder vector but no words
    for name in ("ptr", "words", "counts", "lengths", "emb"):
        assert np.array_equal(getattr(ahead, name), getattr(plain, name)), name
    assert ahead.vocab_size == plain.vocab_size
    # views read without the encoder: the featurizer encodes them itself
    words_only = read_texts(tokenizer, None, docs)
    assert not any(v.encoded for v in words_only)
    batch, _ = featurizer().featurize(docs, read=words_only)
    assert batch.emb is not None and np.array_equal(batch.emb, plain.emb)
    # the control: the views are what the batch is made of (encoded, no vector: none in it)
    no_vectors = [TextViews(v.tokens) for v in words_only]
    batch, _ = featurizer().featurize(docs, read=no_vectors)
    assert batch.emb is not None and not np.array_equal(batch.emb, plain.emb)
