"""The EDCM likelihood (paper 002 eq. 2): trigamma and the shape equation against scipy, the
seating kernel against a from-scratch oracle of the smoothed Elkan fixed point, and the model's
deltas, forgetting, determinism, re-founding and quality on a generated word stream."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq
from scipy.special import digamma as sp_digamma
from scipy.special import gammaln, polygamma

from noveld.eval.metrics import clustering_scores
from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig, replay_delta
from noveld.models.edcm import EDCMConfig, EDCMMixture
from noveld.models.kernels import edcm as ekern
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import NamespaceState, state_digest
from noveld.synth import SynthConfig, generate

LENGTHS = ekern.bin_lengths()


# ---- special functions and the shape equation ------------------------------------------------
@settings(deadline=None, max_examples=300)
@given(st.floats(1e-4, 1e6))
def test_trigamma_matches_scipy(x: float) -> None:
    assert ekern.trigamma(x) == pytest.approx(float(polygamma(1, x)), rel=1e-10)


def test_length_bins_are_exact_then_geometric() -> None:
    assert [ekern.length_bin(n) for n in (0, 1, 2, 64)] == [0, 0, 1, 63]
    bins = [ekern.length_bin(n) for n in range(1, 40_000)]
    assert bins == sorted(bins) and bins[-1] == ekern.N_BINS - 1
    for n in (65, 100, 1000, 16_000):  # a long document's bin stands for a length within 2^(1/8)
        assert abs(math.log2(LENGTHS[ekern.length_bin(n)] / n)) <= 1 / ekern.BINS_PER_OCTAVE


def histogram(rng: np.random.Generator, long_docs: bool) -> np.ndarray:
    h = np.zeros(ekern.N_BINS)
    top = ekern.N_BINS if long_docs else 40
    idx = rng.integers(0, top, rng.integers(1, 8))
    h[idx] += rng.random(idx.shape[0]) * 20 + 0.01
    return h


def oracle_d(h: np.ndarray, g: float, s: float) -> float:
    """D(s) = Σ_b h_b [ψ(s + n_b) − ψ(s)] with scipy's digamma."""
    nz = np.flatnonzero(h)
    return float((h[nz] * g * (sp_digamma(s + LENGTHS[nz]) - sp_digamma(s))).sum())


@settings(deadline=None, max_examples=200)
@given(st.integers(0, 10_000), st.booleans(), st.floats(0.05, 1.0), st.floats(0.1, 50.0))
def test_shape_solves_the_smoothed_fixed_point(
    seed: int, long_docs: bool, g: float, c: float
) -> None:
    rng = np.random.default_rng(seed)
    h = histogram(rng, long_docs)
    m = float(h.sum() * g)
    total = m * (1.0 + rng.random() * 10) + c * rng.random() * 100 + 1e-3
    root = brentq(lambda s: s * (oracle_d(h, g, s) + c) - total, 1e-12, total / c, xtol=1e-14)
    start = float(rng.choice([1e-3, total / c, root * 1.5]))
    s, d = ekern.solve_shape(h, LENGTHS, g, total, c, start)
    assert s == pytest.approx(root, rel=1e-9)
    assert d == pytest.approx(oracle_d(h, g, s), rel=1e-9)


@settings(deadline=None, max_examples=100)
@given(st.integers(0, 10_000), st.floats(0.01, 500.0))
def test_shape_terms_derivative_matches_a_finite_difference(seed: int, s: float) -> None:
    h = histogram(np.random.default_rng(seed), True)
    d, dd = ekern.shape_terms(h, LENGTHS, 1.0, s)
    eps = s * 1e-6
    slope = (oracle_d(h, 1.0, s + eps) - oracle_d(h, 1.0, s - eps)) / (2 * eps)
    assert d == pytest.approx(oracle_d(h, 1.0, s), rel=1e-10)
    assert dd == pytest.approx(d + s * slope, rel=1e-5, abs=1e-7 * max(d, 1.0))


def test_an_empty_cluster_has_the_prior_shape() -> None:
    s, d = ekern.solve_shape(np.zeros(ekern.N_BINS), LENGTHS, 1.0, 12.0, 4.0, 1.0)
    assert (s, d) == (3.0, 0.0)


# ---- the oracle: clusters as explicit member lists ------------------------------------------
V = 30
BIN0 = V  # the length bins' vocabulary ids follow the words


def new_model(**kw: object) -> EDCMMixture:
    model = EDCMMixture(EDCMConfig(**kw))  # type: ignore[arg-type]
    model.bind_length_words(list(range(BIN0, BIN0 + ekern.N_BINS)))
    return model


def batch_of(docs: list[list[int]]) -> DocBatch:
    b = DocBatch.from_docs(docs, V + ekern.N_BINS)
    return DocBatch(b.ptr, b.words, b.counts, b.lengths, b.vocab_size, ekern.N_BINS)


def oracle_log_edcm(doc: list[int], members: list[list[int]], b0: float, c: float) -> float:
    """log EDCM(x | β_k) (paper 002 eq. 2, with n! and 1/x_w) under the smoothed fixed point
    of the cluster ``members`` (β = b0 everywhere for none)."""
    words, counts = np.unique(doc, return_counts=True)
    n = len(doc)
    df = np.zeros(V)
    h = np.zeros(ekern.N_BINS)
    t = 0.0
    for mdoc in members:
        u = np.unique(mdoc)
        df[u] += 1
        t += u.shape[0]
        h[ekern.length_bin(len(mdoc))] += 1
    total = t + c * V * b0
    if members:
        s = brentq(lambda x: x * (oracle_d(h, 1.0, x) + c) - total, 1e-12, total / c, xtol=1e-14)
        dk = oracle_d(h, 1.0, s)
    else:
        s, dk = V * b0, 0.0
    beta = (df + c * b0) / (dk + c)
    return float(
        gammaln(n + 1) + gammaln(s) - gammaln(s + n) + (np.log(beta[words]) - np.log(counts)).sum()
    )


def random_docs(rng: np.random.Generator, n: int) -> list[list[int]]:
    """Short documents with repeated words, drawn around a few topics."""
    topics = [rng.choice(V, 8, replace=False) for _ in range(4)]
    out = []
    for _ in range(n):
        t = topics[int(rng.integers(0, 4))]
        out.append([int(w) for w in rng.choice(t, int(rng.integers(1, 9)))])
    return out


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 10_000), st.floats(0.0, 0.6), st.sampled_from([0.001, 0.01, 0.1]))
def test_seating_weights_equal_the_oracle_up_to_one_constant(
    seed: int, discount: float, b0: float
) -> None:
    rng = np.random.default_rng(seed)
    c = 5.0
    model = new_model(prior=b0, prior_docs=c, discount=discount, alpha=0.5, alpha_scaling="none",
                      rejuvenation_sweeps=0, deterministic=True)  # fmt: skip
    stats = model.new_state()
    history = random_docs(rng, 12)
    res = model.partial_fit(batch_of(history), stats, rng)
    members: dict[int, list[list[int]]] = {}
    for doc, u in zip(history, res.assignments.tolist(), strict=True):
        members.setdefault(int(u), []).append(doc)
    doc = random_docs(rng, 1)[0]
    slots, p = model.seating_probabilities(
        np.unique(doc), np.unique(doc, return_counts=True)[1], stats, V
    )
    logits = []
    for k in slots.tolist():
        mem = members[int(stats.uid[k])]
        logits.append(math.log(max(len(mem) - discount, 1e-3)) + oracle_log_edcm(doc, mem, b0, c))
    logits.append(math.log(0.5 + discount * len(members)) + oracle_log_edcm(doc, [], b0, c))
    q = np.exp(np.array(logits) - max(logits))
    np.testing.assert_allclose(p, q / q.sum(), rtol=1e-7, atol=1e-12)


def oracle_fit(
    members: list[list[int]], prior: np.ndarray, c: float, nv: int
) -> tuple[np.ndarray, float]:
    """(β, s) of a cluster: the smoothed fixed point toward per-word prior ``prior`` (b_w) with
    ``c`` pseudo-documents, solved from scratch by brentq (the prior itself for none)."""
    df = np.zeros(nv)
    h = np.zeros(ekern.N_BINS)
    for mdoc in members:
        df[np.unique(mdoc)] += 1
        h[ekern.length_bin(len(mdoc))] += 1
    if not members:
        return prior.copy(), float(prior.sum())
    total = df.sum() + c * prior.sum()
    s = brentq(lambda x: x * (oracle_d(h, 1.0, x) + c) - total, 1e-12, total / c, xtol=1e-14)
    return (df + c * prior) / (oracle_d(h, 1.0, s) + c), float(s)


def oracle_log_dcm(doc: list[int], beta: np.ndarray, s: float) -> float:
    """log EDCM(x | β) with shape s (paper 002 eq. 2, n! and 1/x_w included)."""
    words, counts = np.unique(doc, return_counts=True)
    n = len(doc)
    return float(
        gammaln(n + 1) + gammaln(s) - gammaln(s + n) + (np.log(beta[words]) - np.log(counts)).sum()
    )


@settings(deadline=None, max_examples=25)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.5]), st.sampled_from([25.0, 45.0]))
def test_long_documents_lean_on_the_corpus_prior_as_the_oracle_does(
    seed: int, discount: float, mean_words: float
) -> None:
    """Documents averaging ``mean_words`` distinct words (r = 0.25 or 1 into the long-document
    regime, which runs from 20 to 40): the clusters' prior is ``b_w = (c·b0 + c'·β⁰_w)/(c + c')``
    with ``b0 = b0_short^(1−r)·b0_long^r``, ``c`` likewise linear in r, ``c' = r·c'_long`` and β⁰
    the corpus EDCM (every live document as one cluster under the symmetric (b0, c)); the new
    cluster's β is b."""
    rng = np.random.default_rng(seed)
    nv, b_short, c_short, b_long, c_long, c_max = 300, 0.001, 5.0, 0.003, 40.0, 45.0
    u_lo, u_hi = 20.0, 40.0
    model = EDCMMixture(EDCMConfig(prior=b_short, prior_docs=c_short, discount=discount,
                                   alpha=0.5, alpha_scaling="none", rejuvenation_sweeps=0,
                                   long_words=u_lo, long_words_full=u_hi, long_prior=b_long,
                                   long_prior_docs=c_long, background_docs=c_max))  # fmt: skip
    model.bind_length_words(list(range(nv, nv + ekern.N_BINS)))
    topics = [rng.choice(nv, 120, replace=False) for _ in range(3)]
    span = int(mean_words)

    def draw() -> list[int]:
        t = topics[int(rng.integers(0, 3))]
        ws = rng.choice(t, span, replace=False)
        return [int(w) for w in np.concatenate([ws, rng.choice(ws, 5)])]

    history = [draw() for _ in range(20)]

    def as_batch(docs: list[list[int]]) -> DocBatch:
        b = DocBatch.from_docs(docs, nv + ekern.N_BINS)
        return DocBatch(b.ptr, b.words, b.counts, b.lengths, b.vocab_size, ekern.N_BINS)

    stats = model.new_state()
    known = np.array([i % 3 for i in range(len(history))], dtype=np.int64)
    model.partial_fit(as_batch(history), stats, rng, known=known)
    members: dict[int, list[list[int]]] = {0: [], 1: [], 2: []}
    for doc, k in zip(history, known.tolist(), strict=True):
        members[k].append(doc)
    # the oracle's prior: the corpus as one cluster under the symmetric prior
    u_bar = sum(len(set(d)) for d in history) / len(history)
    r = min(max((u_bar - u_lo) / (u_hi - u_lo), 0.0), 1.0)
    assert r > 0.0
    b0 = b_short ** (1 - r) * b_long**r
    c = c_short + r * (c_long - c_short)
    c_bg = r * c_max
    beta0, _ = oracle_fit(history, np.full(nv, b0), c, nv)
    prior = (c * b0 + c_bg * beta0) / (c + c_bg)
    doc = draw()
    slots, p = model.seating_probabilities(
        np.unique(doc), np.unique(doc, return_counts=True)[1], stats, nv
    )
    logits = []
    for k in slots.tolist():
        mem = members[int(stats.uid[k])]
        beta, s = oracle_fit(mem, prior, c + c_bg, nv)
        logits.append(math.log(len(mem) - discount) + oracle_log_dcm(doc, beta, s))
    logits.append(math.log(0.5 + discount * 3) + oracle_log_dcm(doc, prior, float(prior.sum())))
    q = np.exp(np.array(logits) - max(logits))
    np.testing.assert_allclose(p, q / q.sum(), rtol=1e-6, atol=1e-12)


@settings(deadline=None, max_examples=40)
@given(st.integers(0, 10_000), st.floats(0.0, 0.6), st.sampled_from([0.001, 0.01, 0.1]))
def test_linear_weights_are_the_exponentiated_log_weights(
    seed: int, discount: float, b0: float
) -> None:
    """The hot path (documents of ≤ 16 tokens) scores in the linear domain; it must be the
    log-domain kernel's weights, exponentiated."""
    rng = np.random.default_rng(seed)
    model = new_model(prior=b0, discount=discount, rejuvenation_sweeps=1, deterministic=False)
    stats = model.new_state()
    model.partial_fit(batch_of(random_docs(rng, 30)), stats, rng)
    sh = model.shapes(stats, V)
    kmax, cfg = stats.kmax, model.config
    for doc in random_docs(rng, 5):
        words = np.unique(doc).astype(np.int64)
        lp, wt = np.empty(kmax), np.empty(kmax)
        cb = np.full(words.shape[0], cfg.prior_docs * b0)  # the symmetric prior's c·b0
        common = (stats.head, stats.nxt, stats.pk, stats.pc, kmax, stats.scale, cfg.prior_docs,
                  cb, V * b0)  # fmt: skip
        lp_new = ekern.score_document(
            words, len(doc), lp, stats.alive, sh.shape, *common, math.log(0.7), discount
        )
        w_new = ekern.score_document_linear(
            words, len(doc), wt, stats.alive, sh.shape, *common, 0.7, discount
        )
        np.testing.assert_allclose(wt, np.exp(lp), rtol=1e-11)
        assert w_new == pytest.approx(math.exp(lp_new), rel=1e-11)


@settings(deadline=None, max_examples=25)
@given(st.integers(0, 10_000))
def test_one_pass_map_seating_equals_the_oracle(seed: int) -> None:
    rng = np.random.default_rng(seed)
    b0, c, alpha = 0.01, 5.0, 0.3
    model = new_model(prior=b0, prior_docs=c, discount=0.0, alpha=alpha, alpha_scaling="none",
                      rejuvenation_sweeps=0, deterministic=True)  # fmt: skip
    stats = model.new_state()
    docs = random_docs(rng, 40)
    got = model.partial_fit(batch_of(docs), stats, rng).assignments.tolist()
    clusters: list[list[list[int]]] = []
    want = []
    for doc in docs:
        scores = [math.log(len(m)) + oracle_log_edcm(doc, m, b0, c) for m in clusters]
        new = math.log(alpha) + oracle_log_edcm(doc, [], b0, c)
        top = sorted([*scores, new], reverse=True)
        # an exact tie (two clusters holding the same documents) is broken by rounding
        assume(len(top) < 2 or top[0] - top[1] > 1e-9)
        best = int(np.argmax(scores)) if scores else -1
        if best < 0 or not scores[best] > new:
            clusters.append([])
            best = len(clusters) - 1
        clusters[best].append(doc)
        want.append(best)
    assert clustering_scores([str(w) for w in want], got)["nmi"] == pytest.approx(1.0)
    assert len(set(got)) == len(clusters)


# ---- the model -------------------------------------------------------------------------------
def word_stream(docs: int, seed: int) -> tuple[list[DocBatch], list[str]]:
    """A generated labelled stream in batches of 64: ids for its words, then the length bins."""
    cfg = SynthConfig(n_docs=docs, n_stories=12, vocab_size=600, doc_len_mean=14.0, seed=seed)
    stream = list(generate(cfg))
    vocab: dict[str, int] = {}
    ids = [[vocab.setdefault(t, len(vocab)) for t in str(d["text"]).split()] for d in stream]
    nv = len(vocab)
    batches = []
    for i in range(0, len(ids), 64):
        b = DocBatch.from_docs(ids[i : i + 64], nv + ekern.N_BINS)
        batches.append(DocBatch(b.ptr, b.words, b.counts, b.lengths, b.vocab_size, ekern.N_BINS))
    return batches, [str(d["label"]) for d in stream]


def stream_model(n_words: int, **kw: object) -> EDCMMixture:
    model = EDCMMixture(EDCMConfig(**kw))  # type: ignore[arg-type]
    model.bind_length_words(list(range(n_words, n_words + ekern.N_BINS)))
    return model


def test_clusters_a_generated_word_stream() -> None:
    batches, labels = word_stream(1500, 1)
    model = stream_model(batches[0].n_words, deterministic=True)
    stats = model.new_state()
    preds: list[int] = []
    for i, b in enumerate(batches):
        preds += model.partial_fit(b, stats, np.random.default_rng(i)).assignments.tolist()
    assert clustering_scores(labels, preds)["nmi"] >= 0.9


def true_counts(stats: MultinomialStats) -> dict[tuple[int, int], float]:
    """Every live cluster's true statistics keyed by (uid, word); word −1 is m, −2 is ntok."""
    out: dict[tuple[int, int], float] = {}
    for k in stats.active_slots().tolist():
        u = int(stats.uid[k])
        out[(u, -1)] = float(stats.m[k] * stats.scale)
        out[(u, -2)] = float(stats.ntok[k] * stats.scale)
        ws, cs = stats.word_counts(k)
        out.update({(u, int(w)): float(c) for w, c in zip(ws, cs, strict=True) if c > 1e-12})
    return out


@pytest.mark.parametrize("half_life", [0.0, 300.0])
def test_deltas_replay_to_the_writer_state(half_life: float) -> None:
    batches, _ = word_stream(800, 2)
    model = stream_model(
        batches[0].n_words, half_life_docs=half_life, retire_min_mass=0.5, deterministic=False
    )
    stats, replica = model.new_state(), model.new_state()
    retired = 0
    for i, b in enumerate(batches):
        res = model.partial_fit(b, stats, np.random.default_rng(i))
        retired += len(res.retired)
        replay_delta(replica, res.delta, half_life)
    if half_life == 0:  # integer counts: bit for bit
        assert state_digest(NamespaceState({}, replica)) == state_digest(NamespaceState({}, stats))
    else:  # under forgetting the writer's raw additions and the replayed sums differ in rounding
        assert true_counts(replica) == pytest.approx(true_counts(stats), rel=1e-9)
    # the kernel kept its histograms and T current as documents moved: they match the pool
    hist = model.shapes(stats, batches[0].n_words).hist
    live = stats.active_slots()
    np.testing.assert_allclose(hist[live].sum(axis=1), stats.m[live], rtol=1e-9)
    if half_life:
        assert float(stats.mass(live).sum()) < 800 * 0.9 and retired > 0


def test_same_seed_same_state_with_sampled_seating() -> None:
    batches, _ = word_stream(400, 3)
    digests = []
    for _ in range(2):
        model = stream_model(batches[0].n_words, deterministic=False)
        stats = model.new_state()
        for i, b in enumerate(batches):
            model.partial_fit(b, stats, np.random.default_rng(i))
        digests.append(state_digest(NamespaceState({}, stats)))
    assert digests[0] == digests[1]


def test_the_store_counts_document_frequencies_and_lengths() -> None:
    model = new_model()
    stats = model.new_state()
    res = model.partial_fit(batch_of([[1, 1, 1, 2], [1, 2, 3]]), stats, np.random.default_rng(0),
                            known=np.array([7, 7]))  # fmt: skip
    assert res.assignments.tolist() == [7, 7]
    slot = int(np.flatnonzero(stats.uid[: stats.kmax] == 7)[0])
    ws, cs = stats.word_counts(slot)
    counts = dict(zip(ws.tolist(), cs.tolist(), strict=True))
    # documents containing each word, and one per document on its length bin (4 and 3 tokens)
    assert counts == {1: 2.0, 2: 2.0, 3: 1.0, BIN0 + 3: 1.0, BIN0 + 2: 1.0}
    assert stats.m[slot] == 2.0 and stats.ntok[slot] == 2 + 3 + 2  # T + m
    ws, cs = model.term_weights(stats, 7)
    assert ws.tolist() == [1, 2, 3] or sorted(ws.tolist()) == [1, 2, 3]
    assert all(w < BIN0 for w in ws.tolist())


def test_log_predictive_of_a_first_document_is_the_prior_edcm() -> None:
    model = new_model(prior=0.01, prior_docs=5.0, alpha_scaling="none")
    doc = [3, 3, 4, 9]
    res = model.partial_fit(batch_of([doc]), model.new_state(), np.random.default_rng(0))
    assert res.log_predictive_per_token == pytest.approx(
        oracle_log_edcm(doc, [], 0.01, 5.0) / len(doc), rel=1e-10
    )


def test_a_stray_member_no_longer_fits_its_cluster() -> None:
    model = new_model(deterministic=True)
    stats = model.new_state()
    story = [[1, 2, 3, 4], [1, 2, 3, 5], [2, 3, 4, 5], [1, 3, 4, 5], [1, 2, 4, 5]]
    stray = [20, 21, 22]
    batch = batch_of([stray, *story])
    model.partial_fit(batch, stats, np.random.default_rng(0), known=np.full(6, 5))
    fits = model.refound_test(stats, batch)
    assert not fits(5, *batch.doc(0))  # the stray would open its own cluster
    assert fits(5, *batch.doc(1))  # a story member sits back where it was
    assert not fits(99, *batch.doc(1))  # no such cluster


@settings(max_examples=60, deadline=None)
@given(
    clusters=st.lists(
        st.lists(st.lists(st.integers(0, 9), min_size=1, max_size=5), min_size=1, max_size=4),
        min_size=1,
        max_size=4,
    ),
    which=st.integers(0, 100),
    discount=st.sampled_from([0.0, 0.5]),
)
def test_refounding_matches_taking_the_member_out_and_reseating_it(
    clusters: list[list[list[int]]], which: int, discount: float
) -> None:
    """``still_belongs`` (the re-founding test) is MAP seating of the member against its
    clusters built without it, ties included (small vocabularies make exact ties common)."""
    model = new_model(deterministic=True, rejuvenation_sweeps=0, discount=discount,
                      alpha=0.5, alpha_scaling="none")  # fmt: skip
    k = which % len(clusters)
    d = which % len(clusters[k])

    def fitted(skip: tuple[int, int] | None) -> MultinomialStats:
        members = [(j, i, doc) for j, docs in enumerate(clusters) for i, doc in enumerate(docs)]
        kept = [(j, doc) for j, i, doc in members if (j, i) != skip]
        stats = model.new_state()
        if kept:
            known = np.array([j for j, _ in kept], dtype=np.int64)
            model.partial_fit(batch_of([doc for _, doc in kept]), stats,
                              np.random.default_rng(0), known=known)  # fmt: skip
        return stats

    member = batch_of([clusters[k][d]])
    stats = fitted(None)
    got = model.refound_test(stats, member)(k, *member.doc(0))
    if len(clusters[k]) == 1:
        assert got  # its only member
        return
    seat = model.predict(member, fitted((k, d)))
    assert got == (int(seat[0]) == k)


def test_predict_is_read_only_and_agrees_with_seating() -> None:
    model = new_model(deterministic=True, rejuvenation_sweeps=0)
    stats = model.new_state()
    model.partial_fit(batch_of([[1, 2, 3]] * 5 + [[10, 11, 12]] * 5), stats,
                      np.random.default_rng(0))  # fmt: skip
    before = state_digest(NamespaceState({}, stats))
    got = model.predict(batch_of([[1, 2], [11, 12], [25, 26, 27, 28, 29]]), stats)
    assert state_digest(NamespaceState({}, stats)) == before
    assert got[0] != got[1] and got[0] >= 0 and got[1] >= 0 and got[2] == -1


def test_config_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="positive"):
        EDCMConfig(prior=0.0)
    with pytest.raises(ValueError, match="not available"):
        EDCMConfig(merge=True)
    model = EDCMMixture(EDCMConfig())
    with pytest.raises(RuntimeError, match="bind_length_words"):
        model.partial_fit(batch_of([[1]]), MultinomialStats(), np.random.default_rng(0))
    with pytest.raises(ValueError, match="length-bin ids"):
        model.bind_length_words([1, 2, 3])


def test_bursty_documents_stay_together_under_the_edcm_where_the_multinomial_fragments() -> None:
    """Why the option exists (benchmarks/bursty_stream.py at scale): long documents drawn from
    a Dirichlet compound multinomial around their story (θ_d ~ Dir(5·φ_k)) repeat a few words
    many times. The multinomial reads each burst as evidence against every other document of
    the story and opens cluster after cluster; the EDCM counts a word once per document."""
    rng = np.random.default_rng(4)
    vocab, stories = 2000, 12
    base = 1.0 / np.arange(1, vocab + 1) ** 1.1
    phis = []
    for _ in range(stories):
        mean = 0.5 * base / base.sum()
        mean[rng.choice(vocab, 40, replace=False)] += 0.5 / 40
        phis.append(rng.dirichlet(200.0 * mean))
    labels = rng.integers(0, stories, 1200)
    docs = [rng.choice(vocab, 100, p=rng.dirichlet(5.0 * phis[k] + 1e-9)).tolist() for k in labels]
    nmi = {}
    for likelihood in ("multinomial", "edcm"):
        if likelihood == "edcm":
            model: DPMM = stream_model(vocab, deterministic=True)
        else:
            model = DPMM(DPMMConfig(deterministic=True))
        stats = model.new_state()
        preds: list[int] = []
        for i in range(0, len(docs), 64):
            b = DocBatch.from_docs(docs[i : i + 64], vocab + ekern.N_BINS)
            b = DocBatch(b.ptr, b.words, b.counts, b.lengths, b.vocab_size, ekern.N_BINS)
            preds += model.partial_fit(b, stats, np.random.default_rng(i)).assignments.tolist()
        nmi[likelihood] = clustering_scores([str(k) for k in labels], preds)["nmi"]
    assert nmi["edcm"] >= 0.9  # measured 0.967
    assert nmi["multinomial"] <= nmi["edcm"] - 0.2  # measured 0.523


def long_articles(seed: int, n_docs: int) -> tuple[list[list[int]], list[str], int]:
    """Articles of 80–300 tokens, 60 % of them function words every story shares (Zipfian over
    300 words), the rest drawn from their story's 150 words; 8 stories; vocabulary 3,000."""
    rng = np.random.default_rng(seed)
    vocab, stories, n_fun = 3000, 8, 300
    fun = 1.0 / np.arange(1, n_fun + 1)
    fun /= fun.sum()
    own = [rng.choice(np.arange(n_fun, vocab), 150, replace=False) for _ in range(stories)]
    labels = rng.integers(0, stories, n_docs)
    docs = []
    for k in labels.tolist():
        n = int(rng.integers(80, 300))
        n_f = int(0.6 * n)
        doc = np.concatenate([rng.choice(n_fun, n_f, p=fun), rng.choice(own[k], n - n_f)])
        docs.append([int(w) for w in doc])
    return docs, [str(k) for k in labels.tolist()], vocab


@pytest.mark.parametrize("long_words", [0.0, 40.0])
def test_long_articles_sharing_function_words_find_their_stories(long_words: float) -> None:
    """Why the long-document prior exists: under the symmetric b0 a new cluster pays log b0 for
    every function word an old cluster has seen, so one pass puts every article in the first
    cluster; centred on the corpus, only the story words decide."""
    docs, labels, vocab = long_articles(5, 1000)
    model = stream_model(vocab, deterministic=True, long_words=long_words)
    stats = model.new_state()
    preds: list[int] = []
    for i in range(0, len(docs), 256):
        b = DocBatch.from_docs(docs[i : i + 256], vocab + ekern.N_BINS)
        b = DocBatch(b.ptr, b.words, b.counts, b.lengths, b.vocab_size, ekern.N_BINS)
        preds += model.partial_fit(b, stats, np.random.default_rng(i)).assignments.tolist()
    nmi = clustering_scores(labels, preds)["nmi"]
    if long_words == 0.0:  # the symmetric prior only (the long-document prior off)
        assert nmi <= 0.1  # measured 0.0: one cluster
    else:
        assert nmi >= 0.95 and len(set(preds)) <= 12  # measured 1.0, 8 clusters


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), which=st.integers(0, 100))
def test_refounding_under_the_corpus_prior_matches_reseating_without_the_member(
    seed: int, which: int
) -> None:
    """``still_belongs`` with long documents: taking the member out re-centres the corpus prior
    too, so the answer is MAP seating against the state fitted without it."""
    docs, _, vocab = long_articles(seed, 12)
    groups = [i % 3 for i in range(len(docs))]
    d = which % len(docs)
    model = stream_model(vocab, deterministic=True, rejuvenation_sweeps=0, alpha=0.5,
                         alpha_scaling="none")  # fmt: skip

    def as_batch(ds: list[list[int]]) -> DocBatch:
        b = DocBatch.from_docs(ds, vocab + ekern.N_BINS)
        return DocBatch(b.ptr, b.words, b.counts, b.lengths, b.vocab_size, ekern.N_BINS)

    def fitted(skip: int | None) -> MultinomialStats:
        keep = [i for i in range(len(docs)) if i != skip]
        stats = model.new_state()
        known = np.array([groups[i] for i in keep], dtype=np.int64)
        model.partial_fit(as_batch([docs[i] for i in keep]), stats, np.random.default_rng(0),
                          known=known)  # fmt: skip
        return stats

    member = as_batch([docs[d]])
    got = model.refound_test(fitted(None), member)(groups[d], *member.doc(0))
    seat = model.predict(member, fitted(d))
    assert got == (int(seat[0]) == groups[d])


def test_log_predictive_of_a_first_long_document_is_the_corpus_prior_edcm() -> None:
    """The first batch's prior is centred on the batch itself: a lone long document's predictive
    is the EDCM at ``b_w = (c·b0 + c'·β⁰_w)/(c + c')``, β⁰ fitted to that document."""
    docs, _, vocab = long_articles(3, 1)
    doc = docs[0]
    b0, c, c_bg = 0.003, 40.0, 40.0
    model = stream_model(vocab, alpha_scaling="none", long_prior=b0, long_prior_docs=c,
                         background_docs=c_bg)  # fmt: skip
    b = DocBatch.from_docs([doc], vocab + ekern.N_BINS)
    b = DocBatch(b.ptr, b.words, b.counts, b.lengths, b.vocab_size, ekern.N_BINS)
    res = model.partial_fit(b, model.new_state(), np.random.default_rng(0))
    beta0, _ = oracle_fit([doc], np.full(vocab, b0), c, vocab)
    prior = (c * b0 + c_bg * beta0) / (c + c_bg)
    want = oracle_log_dcm(doc, prior, float(prior.sum())) / len(doc)
    assert res.log_predictive_per_token == pytest.approx(want, rel=1e-9)
