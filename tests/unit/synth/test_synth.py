"""``noveld.synth``: the synthetic labelled stream is deterministic, well-formed, has stories that
are born over time and differ in their words, and writes valid JSON lines."""

from __future__ import annotations

import io
import itertools
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from noveld.synth import SynthConfig, generate, pseudo_words, vocabulary, write_jsonl

SMALL = SynthConfig(n_docs=3000, n_stories=25, vocab_size=1500, birth_rate=0.02, seed=11)


def docs_of(cfg: SynthConfig) -> list[dict[str, Any]]:
    """The whole stream as a list."""
    return list(generate(cfg))


def test_deterministic_per_seed() -> None:
    a, b = docs_of(SMALL), docs_of(SMALL)
    assert a == b
    other = docs_of(
        SynthConfig(n_docs=3000, n_stories=25, vocab_size=1500, birth_rate=0.02, seed=12)
    )
    assert [d["text"] for d in other] != [d["text"] for d in a]
    assert vocabulary(SMALL) == vocabulary(SMALL)


def test_shorter_stream_is_a_prefix_across_chunks() -> None:
    long = SynthConfig(n_docs=9000, seed=3)
    short = SynthConfig(n_docs=4500, seed=3)  # ends inside the second internal chunk
    assert docs_of(short) == list(itertools.islice(generate(long), 4500))


def test_record_shape_ids_and_timestamps() -> None:
    docs = docs_of(SMALL)
    assert len(docs) == SMALL.n_docs
    assert all(set(d) == {"id", "text", "label", "ts"} for d in docs)
    ids = [d["id"] for d in docs]
    assert len(set(ids)) == len(ids)
    assert ids[:3] == ["d000000", "d000001", "d000002"]
    assert all(re.fullmatch(r"d\d{6,}", i) for i in ids)
    ts = [d["ts"] for d in docs]
    assert all(isinstance(t, float) for t in ts)
    assert all(b > a for a, b in itertools.pairwise(ts))
    assert all(re.fullmatch(r"s\d+", d["label"]) for d in docs)


def test_texts_use_the_vocabulary() -> None:
    words = vocabulary(SMALL)
    assert len(words) == SMALL.vocab_size
    assert len(set(words)) == len(words)
    assert all(re.fullmatch(r"[a-z]+", w) for w in words)  # one token each for any tokenizer
    vocab = set(words)
    lengths = []
    for d in docs_of(SMALL):
        toks = d["text"].split(" ")
        assert set(toks) <= vocab
        lengths.append(len(toks))
    assert min(lengths) >= 2
    assert abs(np.mean(lengths) - SMALL.doc_len_mean) < 0.3


def test_pseudo_words_are_unique_and_shortest_first() -> None:
    words = pseudo_words(20_000, np.random.default_rng(5))
    assert len(words) == len(set(words)) == 20_000
    assert [len(w) for w in words] == sorted(len(w) for w in words)


def test_number_of_stories_and_birth_order() -> None:
    docs = docs_of(SMALL)
    labels = [d["label"] for d in docs]
    assert len(set(labels)) == SMALL.n_stories  # 0.02 × 3000 births expected ≫ 25
    first: dict[str, int] = {}
    for i, lab in enumerate(labels):
        first.setdefault(lab, i)
    order = [int(lab[1:]) for lab in first]  # labels in order of first appearance
    assert order == list(range(SMALL.n_stories))
    starts = list(first.values())
    assert starts[0] == 0
    assert all(b > a for a, b in itertools.pairwise(starts))
    assert starts[-1] > len(docs) // 10  # stories really are born over time


def test_birth_rate_extremes() -> None:
    assert {d["label"] for d in generate(SynthConfig(n_docs=500, birth_rate=0.0))} == {"s0"}
    every = docs_of(SynthConfig(n_docs=30, n_stories=30, birth_rate=1.0))
    assert [d["label"] for d in every] == [f"s{k}" for k in range(30)]
    capped = docs_of(SynthConfig(n_docs=200, n_stories=7, birth_rate=1.0))
    assert [d["label"] for d in capped[:7]] == [f"s{k}" for k in range(7)]
    assert {d["label"] for d in capped} == {f"s{k}" for k in range(7)}


def test_story_sizes_vary() -> None:
    sizes = sorted(Counter(d["label"] for d in generate(SynthConfig())).values())
    assert len(sizes) == 40
    assert sizes[-1] > 0.1 * 5000  # some large ...
    assert sizes[0] < 10  # ... and some small


def test_word_distributions_differ_by_story() -> None:
    docs = docs_of(SMALL)[:1500]
    sets = [set(d["text"].split()) for d in docs]
    labels = [d["label"] for d in docs]
    rng = np.random.default_rng(0)
    same: list[float] = []
    cross: list[float] = []
    for _ in range(20_000):
        i, j = (int(x) for x in rng.integers(0, len(docs), 2))
        if i == j:
            continue
        jac = len(sets[i] & sets[j]) / len(sets[i] | sets[j])
        (same if labels[i] == labels[j] else cross).append(jac)
    assert len(same) > 100
    assert len(cross) > 100
    assert np.mean(same) > 2 * np.mean(cross)


def test_stories_share_common_words() -> None:
    # the background makes the most frequent words appear in many different stories
    top = set(vocabulary(SMALL)[:5])
    stories_using = {d["label"] for d in generate(SMALL) if top & set(d["text"].split())}
    assert len(stories_using) > SMALL.n_stories // 2


def test_lifetime_makes_later_documents_favour_recent_stories() -> None:
    ages: dict[float | None, float] = {}
    for lifetime in (None, 300.0):
        docs = docs_of(
            SynthConfig(n_docs=12_000, n_stories=60, birth_rate=0.006, seed=2, lifetime=lifetime)
        )
        born: dict[str, int] = {}
        for i, d in enumerate(docs):
            born.setdefault(d["label"], i)
        tail = range(len(docs) - 3000, len(docs))
        ages[lifetime] = float(np.mean([i - born[docs[i]["label"]] for i in tail]))
    assert ages[300.0] < 0.5 * ages[None]


def test_write_jsonl_matches_generate(tmp_path: Path) -> None:
    cfg = SynthConfig(n_docs=700, seed=4)
    buf = io.StringIO()
    assert write_jsonl(cfg, buf) == 700
    lines = buf.getvalue().splitlines()
    docs = docs_of(cfg)
    assert [json.loads(line) for line in lines] == docs
    assert lines == [json.dumps(d) for d in docs]
    path = tmp_path / "stream.jsonl"
    assert write_jsonl(cfg, path) == 700
    assert path.read_text(encoding="utf-8") == buf.getvalue()
    assert write_jsonl(cfg, str(path)) == 700
    assert write_jsonl(SynthConfig(n_docs=0), io.StringIO()) == 0


@pytest.mark.parametrize(
    "bad",
    [
        {"n_docs": -1},
        {"n_stories": 0},
        {"vocab_size": 5},
        {"doc_len_mean": 0.0},
        {"birth_rate": 1.5},
        {"topic_concentration": 0.0},
        {"story_words": 0},
        {"story_words": 2000},
        {"lifetime": 0.0},
        {"specific_mass": 1.0},
        {"burst_docs": 0.0},
        {"burst_strength": -1.0},
        {"seed": -1},
        {"burstiness": -1.0},
        # beyond what a run could generate (memory, time) or sample (κ's precision)
        {"n_stories": 100_000_000},
        {"doc_len_mean": 1e9},
        {"embedding_dim": 1_000_000},
        {"embedding_dim": 8, "embedding_cosine": 0.999999999},
    ],
)
def test_invalid_config_raises(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        SynthConfig(**bad)


def test_sources_add_a_context_field_correlated_with_the_story() -> None:
    plain = list(generate(SynthConfig(n_docs=3000, seed=5)))
    with_src = list(generate(SynthConfig(n_docs=3000, seed=5, n_sources=6, source_fidelity=0.8)))
    assert [{k: v for k, v in r.items() if k != "context"} for r in with_src] == plain
    by_story: dict[str, Counter[str]] = defaultdict(Counter)
    for r in with_src:
        by_story[r["label"]][r["context"]["source"]] += 1
    home = sum(c.most_common(1)[0][1] for c in by_story.values())
    assert 0.8 <= home / len(with_src) <= 0.9  # 80 % home source, plus a sixth of the rest
    assert len({s for c in by_story.values() for s in c}) == 6
    assert "context" not in plain[0]


def test_burstiness_repeats_words_within_documents_and_changes_nothing_else() -> None:
    plain = list(generate(SynthConfig(n_docs=600, doc_len_mean=40.0, seed=3)))
    bursty = list(generate(SynthConfig(n_docs=600, doc_len_mean=40.0, seed=3, burstiness=2.0)))
    # same stories, lengths and timestamps: only the words are redrawn through the urn
    assert [(r["label"], len(r["text"].split()), r["ts"]) for r in bursty] == [
        (r["label"], len(r["text"].split()), r["ts"]) for r in plain
    ]

    def distinct_share(rows: list[dict[str, Any]]) -> float:
        return float(np.mean([len(set(t := r["text"].split())) / len(t) for r in rows]))

    # Pólya urn with B = 2 over ~40 words: about B·log(1 + n/B) ≈ 6 distinct words, not ~25
    # (measured: 15 % of a document's words are distinct, against 62 % without burstiness)
    assert distinct_share(bursty) < 0.3 and distinct_share(bursty) < 0.5 * distinct_share(plain)
    for r in bursty:  # every word still comes from the vocabulary
        assert set(r["text"].split()) <= set(vocabulary(SynthConfig(seed=3)))


def test_polya_repeats_only_copy_earlier_words_of_the_same_document() -> None:
    from noveld.synth import polya_repeats

    ids = np.arange(1000, dtype=np.int64)  # every fresh draw distinct: copies are visible
    lengths = np.array([1, 9, 90, 900])
    out = polya_repeats(ids, lengths, 0.5, np.random.default_rng(0))
    starts = np.cumsum(lengths) - lengths
    for a, n in zip(starts.tolist(), lengths.tolist(), strict=True):
        doc = out[a : a + n]
        assert doc[0] == a  # a document's first word is always a fresh draw
        assert np.all((doc >= a) & (doc < a + n))  # nothing crosses documents
        assert all(doc[i] == a + i or doc[i] in doc[:i] for i in range(n))  # copies look back
    assert len(set(out[100:].tolist())) < 100  # B = 0.5 over 900 words: a handful of words
    assert np.array_equal(polya_repeats(ids, lengths, 1e12, np.random.default_rng(0)), ids)
