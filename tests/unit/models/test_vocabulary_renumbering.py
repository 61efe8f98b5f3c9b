"""Vocabulary compaction, piece by piece: the vocabulary keeps V (every word ever seen) exact
through compactions and returning words, ``words_in_use`` agrees with a walk of the
statistics, renumbered statistics score bit-identically, novelty candidates' words follow the
renumbering, and a snapshot's record of gone words is checked when read."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from streams import fading_stories

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.models.kernels import multinomial as kern
from noveld.models.novelty import member_words, renumber_member_words
from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import Vocabulary, word_hashes
from noveld.state.base import NamespaceState, state_digest
from noveld.state.memory import read_snapshot, write_snapshot

WORDS = [f"w{i}" for i in range(30)]

ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.sampled_from(WORDS), max_size=8)),
        st.tuples(st.just("compact"), st.lists(st.booleans(), min_size=30, max_size=30)),
        st.tuples(st.just("reload"), st.just([])),
    ),
    max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(ops)
def test_v_counts_every_word_ever_seen_through_compactions(steps: list[tuple[str, list]]) -> None:
    """V = ids + dropped equals the distinct words ever added, whatever was compacted out and
    came back; kept words keep their order; a reload from (list, gone) agrees."""
    vocab = Vocabulary()
    ever: set[str] = set()
    for op, arg in steps:
        if op == "add":
            vocab.ids(arg)
            ever |= set(arg)
        elif op == "compact":
            keep = np.flatnonzero(np.array(arg[: len(vocab)], dtype=bool))
            before = vocab.to_list()
            vocab = vocab.compacted(keep)
            assert vocab.to_list() == [before[i] for i in keep.tolist()]
        else:  # as a store loads it: with the count of words known not to be back, or not
            hashed = Vocabulary.from_list(vocab.to_list(), vocab.gone)
            vocab = Vocabulary.from_list(vocab.to_list(), vocab.gone, vocab.checked)
            assert vocab.dropped == hashed.dropped
        assert len(vocab) + vocab.dropped == len(ever)
        assert [vocab.get(w) for w in vocab.to_list()] == list(range(len(vocab)))
        gone = vocab.gone
        assert gone.dtype == np.uint64 and bool(np.all(gone[1:] > gone[:-1]))


def test_words_added_by_another_writer_and_taken_back_keep_v_exact() -> None:
    """``extend`` (words another writer interned) and ``truncate`` (local ids given back)
    count returning words too."""
    vocab = Vocabulary()
    vocab.ids(["a", "b", "c"])
    vocab = vocab.compacted(np.array([1]))  # a and c gone
    assert (len(vocab), vocab.dropped) == (1, 2)
    vocab.ids(["a", "z"])  # a returns, z is new
    assert (len(vocab), vocab.dropped) == (3, 1)
    vocab.truncate(1)  # both handed back
    assert (len(vocab), vocab.dropped) == (1, 2)
    vocab.extend(["c"])
    assert (len(vocab), vocab.dropped) == (2, 1)


def random_stats(seed: int, half_life: float = 60.0) -> tuple[MultinomialStats, int, DPMM]:
    """Statistics of a fading stream (forgetting on: clusters retire, words fade) and V."""
    docs = fading_stories(1200, seed=seed, story_docs=30)
    vocab = Vocabulary()
    model = DPMM(DPMMConfig(half_life_docs=half_life))
    stats = model.new_state()
    rng = np.random.default_rng(seed)
    for i in range(0, len(docs), 50):
        ids = [vocab.ids(d["text"].split()) for d in docs[i : i + 50]]
        model.partial_fit(DocBatch.from_docs(ids, len(vocab)), stats, rng)
    return stats, len(vocab), model


def test_words_in_use_agrees_with_the_live_clusters_word_counts() -> None:
    stats, n, _ = random_stats(1)
    expected = np.zeros(n, dtype=bool)
    for k in stats.active_slots().tolist():
        ws, cs = stats.word_counts(k)
        expected[ws[cs > 0]] = True
    got = stats.words_in_use(n)
    assert got.tolist() == expected.tolist()
    assert 0 < got.sum() < n  # the stream left words unused: the case compaction is for


@pytest.mark.parametrize("seed", [2, 3])
def test_renumbered_statistics_score_bit_identically(seed: int) -> None:
    stats, n, model = random_stats(seed)
    kept = np.flatnonzero(stats.words_in_use(n))
    new_id = np.full(n, -1)
    new_id[kept] = np.arange(kept.shape[0])
    renumbered = stats.renumbered(kept, n)
    rng = np.random.default_rng(seed)
    vbeta = n * model.config.beta  # V is every word ever seen: unchanged by the renumbering
    for _ in range(50):
        words = np.unique(rng.choice(kept, size=rng.integers(1, 6)))
        counts = rng.integers(1, 3, size=words.shape[0])
        scores = []
        for s, ws in ((stats, words), (renumbered, new_id[words])):
            lp = np.empty(max(s.kmax, 1))
            new = kern.score_document(
                ws, counts, int(counts.sum()), lp, s.m, s.ntok, s.alive, s.head, s.nxt, s.pk,
                s.pc, s.kmax, s.scale, model.config.beta, vbeta, model.log_alpha(1), 0.5,
            )  # fmt: skip
            scores.append((new, lp[: s.kmax][s.alive[: s.kmax]].tolist()))
        assert scores[0] == scores[1]
    # the same clusters with the same (word, count) pairs under the mapping
    for k in stats.active_slots().tolist():
        ws, cs = stats.word_counts(k)
        ws2, cs2 = renumbered.word_counts(k)
        pairs = sorted(zip(new_id[ws].tolist(), cs.tolist(), strict=True))
        assert pairs == sorted(zip(ws2.tolist(), cs2.tolist(), strict=True))


def test_a_renumbering_that_would_lose_counted_words_is_refused() -> None:
    stats, n, _ = random_stats(4)
    in_use = np.flatnonzero(stats.words_in_use(n))
    with pytest.raises(ValueError, match="still counted"):
        stats.renumbered(in_use[1:], n)


def test_novelty_candidates_words_follow_the_renumbering() -> None:
    novelty = {
        "candidates": [
            {"uid": 7, "members": [{"doc_id": "a", "words": [3, 9], "counts": [1, 2]}]},
            {"uid": 8, "members": []},
        ],
        "dropped": 2,
    }
    new_id = np.array([-1, -1, -1, 0, -1, -1, -1, -1, -1, 1])
    assert sorted(member_words(novelty)) == [3, 9]
    out = renumber_member_words(novelty, new_id)
    assert out["candidates"][0]["members"][0]["words"] == [0, 1]
    assert out["candidates"][0]["members"][0]["counts"] == [1, 2]
    assert novelty["candidates"][0]["members"][0]["words"] == [3, 9]  # a copy
    assert out["dropped"] == 2


def test_the_digest_does_not_depend_on_word_ids() -> None:
    """The same clusters over the same words hash alike whatever ids the words have, and V
    counts the gone words."""

    def one_cluster(counts: list[float]) -> MultinomialStats:
        words = [(np.array([0, 1]), np.array(counts))]
        return MultinomialStats.from_clusters([0], [2.0], [3.0], words, 1.0, 1, 2, 2)

    a, b = one_cluster([2.0, 1.0]), one_cluster([1.0, 2.0])
    one = NamespaceState({}, a, vocab=["x", "y"])
    other = NamespaceState({}, b, vocab=["y", "x"])
    assert state_digest(one) == state_digest(other)
    with_gone = NamespaceState({}, b, vocab=["y", "x"], vocab_gone=word_hashes(["q"]))
    assert state_digest(with_gone) != state_digest(one)


def test_a_snapshot_keeps_the_gone_words_and_refuses_a_damaged_record(tmp_path: Path) -> None:
    stats, n, _ = random_stats(5)
    vocab = Vocabulary()
    vocab.ids([f"w{i}" for i in range(n)])
    vocab = vocab.compacted(np.flatnonzero(stats.words_in_use(n)))
    state = NamespaceState(
        {"kind": "dpmm"},
        stats.renumbered(np.flatnonzero(stats.words_in_use(n)), n),
        vocab=vocab.to_list(),
        vocab_gone=vocab.gone,
    )
    path = tmp_path / "state.npz"
    write_snapshot(path, state, [])
    back, _ = read_snapshot(path)
    assert back.vocab == state.vocab
    assert back.vocab_gone.tolist() == state.vocab_gone.tolist()
    assert Vocabulary.from_list(back.vocab, back.vocab_gone).dropped == vocab.dropped > 0
    assert state_digest(back) == state_digest(state)
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["vocab_gone"] = arrays["vocab_gone"][::-1].copy()
    np.savez(path, **arrays)
    with pytest.raises(ValueError, match="vocab_gone"):
        read_snapshot(path)
    meta = json.loads(bytes(arrays["meta"]).decode())
    assert meta["vocab"] == state.vocab
