"""The ``hdp`` model on the shared statistics pool: count algebra of the CRF state, known
categories, determinism, and exact replay of its deltas (what the stores and replicas do)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy.special import gammaln

from noveld.models.base import DocBatch
from noveld.models.dpmm import replay_delta
from noveld.models.hdp import (
    ALPHA_PRIOR,
    GAMMA_PRIOR,
    HDP,
    HDPConfig,
    is_topic,
    resample_dp_concentration,
    resample_group_concentration,
    resample_py_concentration,
    topic_uid,
)
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import NamespaceState, state_digest

TOPICS = 5
WORDS = 30  # real words get ids TOPICS .. TOPICS + WORDS − 1; ids 0 .. TOPICS − 1 are topics


def make_model(**kw: object) -> HDP:
    cfg = dict(topics=TOPICS, sweeps=2, table_alpha=0.5, gamma=2.0, deterministic=False)
    cfg.update(kw)
    model = HDP(HDPConfig(**cfg))  # type: ignore[arg-type]
    model.bind_topic_words(list(range(TOPICS)))
    return model


def batches(seed: int, n_batches: int = 4, size: int = 20) -> list[DocBatch]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_batches):
        docs = [
            (TOPICS + rng.integers(0, WORDS, size=rng.integers(1, 9))).tolist() for _ in range(size)
        ]
        out.append(DocBatch.from_docs(docs, TOPICS + WORDS))
    return out


def table(stats: MultinomialStats) -> dict[int, tuple[float, float, dict[int, float]]]:
    out = {}
    for k in stats.active_slots().tolist():
        ws, cs = stats.word_counts(k)
        out[int(stats.uid[k])] = (
            float(stats.mass(np.array([k]))[0]),
            float(stats.ntok[k] * stats.scale),
            dict(zip(ws.tolist(), cs.tolist(), strict=True)),
        )
    return out


def test_counts_are_consistent_after_each_batch() -> None:
    """Every token is counted once as (topic, word) and once as (category, topic); a category's
    mass counts its tables, at least one per document it holds; topics hold words only and
    categories topic entries only."""
    model = make_model()
    stats = model.new_state()
    tokens = docs = 0
    for i, b in enumerate(batches(1)):
        res = model.partial_fit(b, stats, np.random.default_rng(i))
        tokens += int(b.lengths.sum())
        docs += len(b)
        t = table(stats)
        topics = {u: v for u, v in t.items() if is_topic(np.array([u]))[0]}
        cats = {u: v for u, v in t.items() if u not in topics}
        assert sum(v[1] for v in topics.values()) == pytest.approx(tokens)
        assert sum(v[1] for v in cats.values()) == pytest.approx(tokens)
        for _, n, words in topics.values():
            assert min(words) >= TOPICS and sum(words.values()) == pytest.approx(n)
            assert all(c > 0 for c in words.values())
        for _, n, words in cats.values():
            assert max(words) < TOPICS and sum(words.values()) == pytest.approx(n)
        assert sum(v[0] for v in cats.values()) >= docs  # tables
        assert set(res.assignments.tolist()) <= set(cats)
        assert res.delta.documents() == len(b)
        # a topic's word total per topic equals the categories' count of that topic's entry
        for y in range(TOPICS):
            per_cat = sum(v[2].get(y, 0.0) for v in cats.values())
            assert per_cat == pytest.approx(topics.get(topic_uid(y), (0, 0.0, {}))[1])


def test_known_documents_sit_in_their_category_and_it_is_never_born() -> None:
    model = make_model()
    stats = model.new_state()
    b = batches(2, 1)[0]
    known = np.full(len(b), -1, dtype=np.int64)
    known[:6] = 777
    res = model.partial_fit(b, stats, np.random.default_rng(0), known, frozenset({777}))
    assert res.assignments[:6].tolist() == [777] * 6
    assert 777 not in {u for u, _, _ in res.born}
    assert all(u != 777 for u, _, _ in res.retired)
    # every token of the known documents is counted under 777
    t = table(stats)
    assert t[777][1] >= float(b.lengths[:6].sum())


def test_births_are_new_categories_founded_by_their_first_document() -> None:
    model = make_model()
    stats = model.new_state()
    res = model.partial_fit(batches(3, 1)[0], stats, np.random.default_rng(0))
    assert res.born, "an empty pool must open categories"
    founders = [d for _, d, _ in res.born]
    assert founders == sorted(founders)
    for uid, d, score in res.born:
        assert 0 < score <= 1
        if uid in res.assignments.tolist():
            assert int(np.flatnonzero(res.assignments == uid)[0]) == d


def test_same_seed_same_result_and_different_seed_differs() -> None:
    def run(seed: int) -> tuple[str, list[int]]:
        model = make_model()
        st = NamespaceState({}, model.new_state())
        out: list[int] = []
        for i, b in enumerate(batches(4)):
            out += model.partial_fit(
                b, st.stats, np.random.default_rng([seed, i])
            ).assignments.tolist()
        return state_digest(st), out

    assert run(1) == run(1)
    assert run(1)[0] != run(2)[0]


@pytest.mark.parametrize("half_life", [0.0, 30.0])
def test_replaying_the_deltas_rebuilds_the_writer_state_exactly(half_life: float) -> None:
    """The writer applies its own batch through the replay path, so a process that replays the
    delta log (a restart, a replica) holds bit-identical statistics."""
    model = make_model(half_life_docs=half_life)
    live = NamespaceState({}, model.new_state())
    replayed = NamespaceState({}, MultinomialStats())
    for i, b in enumerate(batches(5, 6)):
        res = model.partial_fit(b, live.stats, np.random.default_rng(i))
        replay_delta(replayed.stats, res.delta, half_life)
        assert state_digest(replayed) == state_digest(live)
    assert int(replayed.stats.ictl[3]) == int(live.stats.ictl[3])  # the uid counter too


def test_topic_entries_are_required_before_fitting() -> None:
    model = HDP(HDPConfig(topics=3))
    with pytest.raises(RuntimeError, match="bind_topic_words"):
        model.partial_fit(batches(6, 1)[0], model.new_state(), np.random.default_rng(0))
    with pytest.raises(ValueError, match="3 topic word ids"):
        model.bind_topic_words([0, 1])


def test_term_weights_mix_the_categorys_topics() -> None:
    model = make_model()
    stats = model.new_state()
    res = model.partial_fit(batches(7, 1)[0], stats, np.random.default_rng(0))
    uid = int(res.assignments[0])
    words, weights = model.term_weights(stats, uid)
    assert words.shape == weights.shape and words.shape[0] > 0
    assert np.all(words >= TOPICS)  # real words, never topic entries
    slot = int(np.flatnonzero(stats.uid[: stats.kmax] == uid)[0])
    assert weights.sum() == pytest.approx(float(stats.ntok[slot] * stats.scale))
    assert model.term_weights(stats, 123456789)[0].shape == (0,)


def _posterior_mean(log_density: Callable[[np.ndarray], np.ndarray]) -> float:
    grid = np.linspace(1e-4, 200.0, 400_001)
    logp = log_density(grid)
    w = np.exp(logp - logp.max())
    return float((grid * w).sum() / w.sum())


@pytest.mark.parametrize(("k", "n"), [(5, 100), (40, 3000)])
def test_dp_concentration_chain_targets_the_crp_posterior(k: int, n: int) -> None:
    """Long-run mean of the Escobar–West chain = mean of p(γ) γ^K Γ(γ)/Γ(γ+n)."""
    a, b = GAMMA_PRIOR
    exact = _posterior_mean(
        lambda g: (a - 1) * np.log(g) - b * g + k * np.log(g) + gammaln(g) - gammaln(g + n)
    )
    rng = np.random.default_rng(0)
    value, draws = 1.0, []
    for _ in range(4000):
        value = resample_dp_concentration(value, k, float(n), rng, 1)
        draws.append(value)
    assert np.mean(draws[500:]) == pytest.approx(exact, rel=0.05)


@pytest.mark.parametrize(("k", "n", "d"), [(5, 100, 0.5), (40, 3000, 0.5), (40, 3000, 0.25)])
def test_py_concentration_chain_targets_the_eppf_posterior(k: int, n: int, d: float) -> None:
    """Long-run mean of Teh's chain = mean of p(θ) Π_{i<K} (θ + d·i) Γ(θ+1)/Γ(θ+n)."""
    a, b = GAMMA_PRIOR
    steps = d * np.arange(1, k)

    def logp(g: np.ndarray) -> np.ndarray:
        out = (a - 1) * np.log(g) - b * g + gammaln(g + 1) - gammaln(g + n)
        for s in steps:
            out = out + np.log(g + s)
        return out

    exact = _posterior_mean(logp)
    rng = np.random.default_rng(2)
    value, draws = 1.0, []
    for _ in range(4000):
        value = resample_py_concentration(value, d, k, float(n), rng, 1)
        draws.append(value)
    assert np.mean(draws[500:]) == pytest.approx(exact, rel=0.05)


def test_group_concentration_chain_targets_its_posterior() -> None:
    """Teh et al.'s auxiliary variables: p(α | m_j, n_j) ∝ p(α) Π_j α^{m_j} Γ(α)/Γ(α+n_j)."""
    a, b = ALPHA_PRIOR
    tables = np.array([1, 2, 1, 3, 1, 2, 1, 1], dtype=np.float64)
    customers = np.array([4, 7, 3, 12, 5, 6, 2, 9])

    def logp(x: np.ndarray) -> np.ndarray:
        out = (a - 1) * np.log(x) - b * x
        for m, n in zip(tables, customers, strict=True):
            out = out + m * np.log(x) + gammaln(x) - gammaln(x + n)
        return out

    exact = _posterior_mean(logp)
    rng = np.random.default_rng(1)
    value, draws = 1.0, []
    for _ in range(6000):
        value = resample_group_concentration(value, tables, customers, rng, 1)
        draws.append(value)
    assert np.mean(draws[500:]) == pytest.approx(exact, rel=0.05)


def test_concentrations_are_resampled_per_batch_and_reproducibly() -> None:
    model = make_model(resample_concentrations=True, gamma=1.0, table_alpha=1.0)
    stats = model.new_state()
    seen = []
    for i, b in enumerate(batches(8, 3)):
        model.partial_fit(b, stats, np.random.default_rng(i))
        seen.append(model.last_concentrations)
    assert all(a > 0 and g > 0 for a, g in seen) and seen[-1] != (1.0, 1.0)
    again = make_model(resample_concentrations=True, gamma=1.0, table_alpha=1.0)
    stats = again.new_state()
    for i, b in enumerate(batches(8, 3)):
        again.partial_fit(b, stats, np.random.default_rng(i))
    assert again.last_concentrations == seen[-1]
    fixed = make_model(resample_concentrations=False, gamma=3.0, table_alpha=0.5)
    fixed.partial_fit(batches(8, 1)[0], fixed.new_state(), np.random.default_rng(0))
    assert fixed.last_concentrations == (0.5, 3.0)


def test_batch_state_densifies_and_indexes_the_pool_exactly() -> None:
    """``_BatchState.gather`` (one walk of the postings) equals the counts read slot by slot,
    and its indexes list exactly the nonzero topic of each word and category."""
    from noveld.models.hdp import _BatchState

    model = make_model()
    stats = model.new_state()
    for i, b in enumerate(batches(9, 3)):
        model.partial_fit(b, stats, np.random.default_rng(i))
    bwords = np.arange(TOPICS, TOPICS + WORDS, dtype=np.int64)
    tokens = np.full(WORDS, 2, dtype=np.int64)
    loc = _BatchState.gather(
        np.arange(TOPICS, dtype=np.int64), stats, 1.0, bwords, tokens, None, TOPICS, 0.3, 7, 5,
        batches(9, 1)[0],
    )  # fmt: skip
    nlw, nl, inv, inv_sum = loc.tw
    okl, ok, mk, alive, uid = loc.cat
    nz, nzlen, innz, cz, czlen, wz, wz_ptr, wzlen = loc.ix
    t = table(stats)
    cats = sorted(u for u in t if not is_topic(np.array([u]))[0])
    assert uid[: len(cats)].tolist() == cats and loc.n_existing == len(cats)
    assert okl.shape[0] == len(cats) + 7 and not alive[len(cats) :].any()
    for y in range(TOPICS):
        m, n, words = t.get(topic_uid(y), (0.0, 0.0, {}))
        assert nl[y] == pytest.approx(n) and inv[y] == pytest.approx(1 / (0.3 + n))
        for j, w in enumerate(bwords.tolist()):
            assert nlw[j, y] == pytest.approx(words.get(w, 0.0))
    assert inv_sum[0] == pytest.approx(inv.sum())
    for r, u in enumerate(cats):
        m, n, topics = t[u]
        assert mk[r] == pytest.approx(m) and ok[r] == pytest.approx(n)
        assert {y for y in range(TOPICS) if topics.get(y, 0) > 0} == set(nz[r, : nzlen[r]])
        for y in range(TOPICS):
            assert okl[r, y] == pytest.approx(topics.get(y, 0.0))
            assert innz[r, y] == (topics.get(y, 0.0) > 0)
    for y in range(TOPICS):
        assert set(cz[y, : czlen[y]].tolist()) == set(np.flatnonzero(innz[:, y]).tolist())
    for j in range(WORDS):
        assert set(wz[wz_ptr[j] : wz_ptr[j] + wzlen[j]].tolist()) == set(
            np.flatnonzero(nlw[j] > 0).tolist()
        )
        assert wz_ptr[j + 1] - wz_ptr[j] == wzlen[j] + tokens[j] + 1  # room for the batch


def context_batches(seed: int, with_context: bool) -> tuple[list[DocBatch], list[int]]:
    """Two stories that use the same words (text cannot tell them apart) but come from
    different sources; the context field ``source`` is the only evidence."""
    rng = np.random.default_rng(seed)
    out, truth = [], []
    value_of = {0: TOPICS + WORDS, 1: TOPICS + WORDS + 1}  # "source=a", "source=b"
    field_id = TOPICS + WORDS + 2  # "source"
    for _ in range(4):
        docs, stories = [], []
        for _ in range(30):
            story = int(rng.integers(2))
            docs.append((TOPICS + rng.integers(0, 6, size=5)).tolist())
            stories.append(story)
        b = DocBatch.from_docs(docs, TOPICS + WORDS + 3)
        if with_context:
            b = DocBatch(
                b.ptr, b.words, b.counts, b.lengths, b.vocab_size, 3,
                ctx_ptr=np.arange(len(docs) + 1, dtype=np.int64),
                ctx_value=np.array([value_of[s] for s in stories], dtype=np.int64),
                ctx_field=np.full(len(docs), field_id, dtype=np.int64),
                ctx_card=np.full(len(docs), 2.0),
            )  # fmt: skip
        out.append(b)
        truth += stories
    return out, truth


def test_context_separates_categories_the_text_cannot() -> None:
    """Paper 001's context at the category level: documents alike in words but from different
    sources form different categories when their context is observed, one when it is not."""
    from noveld.eval.metrics import clustering_scores

    nmi = {}
    for with_context in (True, False):
        # merges off: the two stories' words come from one distribution, so pooling them into
        # one category is, by words alone, worth more than these 15-document categories'
        # context evidence against it; the merge move weighs the whole posterior (tested below)
        model = make_model(deterministic=True, gamma=1.0, merge=False)
        stats = model.new_state()
        batch_list, truth = context_batches(10, with_context)
        pred: list[int] = []
        for i, b in enumerate(batch_list):
            pred += model.partial_fit(b, stats, np.random.default_rng(i)).assignments.tolist()
        nmi[with_context] = clustering_scores([str(t) for t in truth], pred)["nmi"]
    assert nmi[True] > 0.9
    assert nmi[False] < 0.3


def test_context_counts_replay_exactly_and_sum_to_documents() -> None:
    model = make_model()
    live = NamespaceState({}, model.new_state())
    replayed = NamespaceState({}, MultinomialStats())
    batch_list, _ = context_batches(11, True)
    for i, b in enumerate(batch_list):
        res = model.partial_fit(b, live.stats, np.random.default_rng(i))
        replay_delta(replayed.stats, res.delta, 0.0)
        assert state_digest(replayed) == state_digest(live)
    t = table(live.stats)
    field_id = TOPICS + WORDS + 2
    per_value = sum(
        v[2].get(TOPICS + WORDS, 0) + v[2].get(TOPICS + WORDS + 1, 0) for v in t.values()
    )
    per_field = sum(v[2].get(field_id, 0) for v in t.values())
    assert per_value == pytest.approx(120) and per_field == pytest.approx(120)  # one per document


def test_a_burst_seated_in_an_old_category_gets_its_own() -> None:
    """The hdp burst split: a new story's documents, each closer to an old category than to a
    new one when seated alone, leave it together when that raises the posterior (under the DP
    of eq. 2: a Pitman–Yor discount would already seat the second one apart)."""
    old = [[TOPICS + w for w in (0, 1, 2, 3)]] * 8
    burst = [[TOPICS + w for w in ws] for ws in ([3, 8, 9], [3, 9, 10], [3, 8, 10])]
    out = {}
    for split in (True, False):
        model = make_model(deterministic=True, sweeps=0, gamma=0.05, split=split, discount=0.0,
                           resample_concentrations=False)  # fmt: skip
        live = NamespaceState({}, model.new_state())
        replayed = NamespaceState({}, MultinomialStats())
        r1 = model.partial_fit(DocBatch.from_docs(old, TOPICS + WORDS), live.stats,
                               np.random.default_rng(0))  # fmt: skip
        replay_delta(replayed.stats, r1.delta, 0.0)
        r2 = model.partial_fit(DocBatch.from_docs(burst, TOPICS + WORDS), live.stats,
                               np.random.default_rng(1))  # fmt: skip
        replay_delta(replayed.stats, r2.delta, 0.0)
        assert state_digest(replayed) == state_digest(live)
        out[split] = (int(r1.assignments[0]), r2.assignments.tolist(), r2.born)
    old_uid, got, born = out[False]
    assert got == [old_uid] * 3 and born == []  # seated one by one, the burst joins the old
    old_uid, got, born = out[True]
    assert len(set(got)) == 1 and got[0] != old_uid
    assert [(u, d) for u, d, _ in born] == [(got[0], 0)]


@pytest.mark.parametrize("discount", [0.0, 0.5])
def test_births_of_one_story_in_a_batch_are_merged(discount: float) -> None:
    """Categories opened in one batch for documents of one story (seated before either had
    weight) merge when that raises the collapsed posterior: whole-group merges, under the DP
    and under a Pitman–Yor category level (which opens three here; one round merges two)."""
    docs = [[TOPICS + w for w in ws] for ws in (
        [0, 1, 2], [3, 4, 5], [0, 1, 3, 4], [2, 5, 0, 3], [1, 4, 2, 5], [0, 1, 2], [3, 4, 5]
    )]  # fmt: skip
    out = {}
    for merge in (True, False):
        model = make_model(deterministic=True, sweeps=0, gamma=0.5, merge=merge, split=False,
                           discount=discount, resample_concentrations=False)  # fmt: skip
        live = NamespaceState({}, model.new_state())
        replayed = NamespaceState({}, MultinomialStats())
        r = model.partial_fit(DocBatch.from_docs(docs, TOPICS + WORDS), live.stats,
                              np.random.default_rng(0))  # fmt: skip
        replay_delta(replayed.stats, r.delta, 0.0)
        assert state_digest(replayed) == state_digest(live)
        out[merge] = (r.assignments.tolist(), [(u, d) for u, d, _ in r.born])
    assert len(set(out[False][0])) >= 2 and len(out[False][1]) == len(set(out[False][0]))
    merged, born = out[True]
    n_apart = len(set(out[False][0]))
    assert len(set(merged)) == n_apart - 1 and len(born) == n_apart - 1
    assert born[0] == (merged[0], 0)  # founded by the first document


def test_a_stray_member_no_longer_fits_its_category() -> None:
    """``HDP.still_belongs`` (re-founding): with a member taken out, the first pass's eq. 6 puts
    a story's document back in its category, and a stray one that shares a single word with it
    elsewhere; it reads the statistics without changing them."""
    story = [[5, 6, 7], [5, 6, 8], [5, 7, 8], [6, 7, 8]]
    stray = [0, 1, 5]
    other = [[0, 1, 2], [0, 1, 3], [0, 2, 3]]
    docs = [[TOPICS + w for w in d] for d in (*other, *story, stray)]
    known = np.array([102] * 3 + [101] * 5, dtype=np.int64)
    model = make_model(deterministic=True, sweeps=1, resample_concentrations=False)
    state = NamespaceState({}, model.new_state())
    model.partial_fit(DocBatch.from_docs(docs, TOPICS + WORDS), state.stats,
                      np.random.default_rng(0), known, frozenset({101, 102}))  # fmt: skip
    before = state_digest(state)
    one = np.ones(3, dtype=np.int64)

    def fits(doc: list[int], uid: int) -> bool:
        return model.still_belongs(np.array([TOPICS + w for w in doc]), one, uid, state.stats,
                                   WORDS)  # fmt: skip

    assert fits(story[0], 101) and fits(story[3], 101)
    assert not fits(stray, 101)
    assert fits(other[0], 102)
    assert not fits(story[0], 999)  # unknown category
    assert state_digest(state) == before
    model.partial_fit(DocBatch.from_docs([[TOPICS + 20, TOPICS + 21]], TOPICS + WORDS),
                      state.stats, np.random.default_rng(1))  # fmt: skip
    alone = [u for u in np.unique(state.stats.uid[state.stats.active_slots()]).tolist()
             if u not in (101, 102) and not is_topic(np.array([u]))[0]]  # fmt: skip
    assert len(alone) == 1
    assert model.still_belongs(np.array([TOPICS + 20, TOPICS + 21]), np.ones(2, np.int64),
                               alone[0], state.stats, WORDS)  # its only member  # fmt: skip


@pytest.mark.parametrize("margin", [20.0, 1e9])
def test_an_unlabelled_twin_category_is_absorbed_into_its_known_category(margin: float) -> None:
    """Story A opens a category unlabelled; then its labelled documents fill known category
    777 (with topics of its own, so the two share none). The twin is absorbed by the test on
    expected word counts; story B's category never is; with an enormous margin nothing is."""
    topics, rng = 20, np.random.default_rng(5)
    model = HDP(HDPConfig(topics=topics, sweeps=1, gamma=1.0, deterministic=True, split=False,
                          resample_concentrations=False, absorb_margin=margin))  # fmt: skip
    model.bind_topic_words(list(range(topics)))
    a_words, b_words = np.arange(topics, topics + 10), np.arange(topics + 20, topics + 30)

    def docs(words: np.ndarray, n: int) -> list[list[int]]:
        return [rng.choice(words, size=6).tolist() for _ in range(n)]

    live, replica = model.new_state(), MultinomialStats()
    pinned = frozenset({777})
    first = model.partial_fit(DocBatch.from_docs(docs(a_words, 8) + docs(b_words, 8), 60),
                              live, rng, None, pinned)  # fmt: skip
    replay_delta(replica, first.delta, 0.0)
    twin, b_cat = int(first.assignments[0]), int(first.assignments[8])
    assert twin != b_cat and set(first.assignments[:8].tolist()) == {twin}
    known = np.full(10, -1, dtype=np.int64)
    known[:5] = 777
    second = model.partial_fit(DocBatch.from_docs(docs(a_words, 10), 60), live, rng, known, pinned)
    replay_delta(replica, second.delta, 0.0)
    assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, live))
    alive = set(live.uid[live.active_slots()].tolist())
    merged = {(s, d) for s, d, _ in second.merged}
    assert b_cat in alive and all(s != b_cat for s, _ in merged)
    if margin < 1e6:
        assert merged == {(twin, 777)} and twin not in alive
        assert set(second.assignments.tolist()) == {777}
        assert np.array_equal(second.delta.merges, np.array([[twin, 777]]))
    else:
        assert not merged and twin in alive


def test_a_documents_context_stays_with_a_category_of_its_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When a sweep moves a document's last token off the table that carries its context, the
    context moves with it: it is always counted in a category that serves the document's words
    (with many tables per document — large α, sampled — it used to stay on the emptied table's
    category, which the delta then credited to another cluster)."""
    seen = {"docs": 0, "orphans": 0}
    original = HDP._delta

    def spy(self: HDP, batch: DocBatch, tokens: np.ndarray, tok_y: np.ndarray,
            tok_cat_uid: np.ndarray, *rest: Any) -> Any:  # fmt: skip
        ctx_uids = rest[-1]
        ends = np.cumsum(batch.lengths).astype(np.int64)  # the tokens of document d, in order
        for d in range(len(batch)):
            cats = set(tok_cat_uid[ends[d] - batch.lengths[d] : ends[d]].tolist())
            seen["docs"] += 1
            seen["orphans"] += int(ctx_uids[d]) not in cats
        return original(self, batch, tokens, tok_y, tok_cat_uid, *rest)

    monkeypatch.setattr(HDP, "_delta", spy)
    model = make_model(table_alpha=200.0, resample_concentrations=False, deterministic=False)
    live = NamespaceState({}, model.new_state())
    replayed = NamespaceState({}, MultinomialStats())
    for seed in (12, 13):
        for i, b in enumerate(context_batches(seed, True)[0]):
            res = model.partial_fit(b, live.stats, np.random.default_rng(i))
            replay_delta(replayed.stats, res.delta, 0.0)
    assert seen == {"docs": 240, "orphans": 0}
    assert state_digest(replayed) == state_digest(live)
