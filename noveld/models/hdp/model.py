"""The ``hdp`` model: two-level category/topic HDP with known labels (LBPL-NTM, paper 000 §3;
DESIGN §5.3). Pure: arrays in, arrays out.

L topics ``φ_l ~ Dir(β)`` over words; categories ``θ_k ~ Dir(ζ)`` over topics; each document is a
restaurant of the Chinese restaurant franchise whose tables serve categories (eqs. 3–7, the
sampler in :mod:`noveld.models.kernels.hdp`). A document's category is the one generating most
of its words; documents with a known label sit at one table of their label's category.

State lives in the same :class:`MultinomialStats` pool as ``dpmm``'s, so the stores, the delta
log, replay and replicas work unchanged:

- topic ``l`` is a cluster with uid :func:`topic_uid` (its own uid slot) whose word counts are
  ``n_lw`` and whose token total is ``n_l``;
- category ``k`` is a cluster with an ordinary uid whose *words* are the topics' reserved
  vocabulary entries (:func:`topic_token`): its count of topic ``l``'s token is ``O_kl``, its
  token total ``O_k``, and its document mass ``m`` counts its tables ``m_k``.

Each batch is densified (topic–word counts of the batch's words only, category–topic counts),
sampled over its own variables, and written back as an additive :class:`StatsDelta` that the
writer applies through the same :func:`apply_additions` a replica uses — replay is exact.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, replace

import numpy as np

from noveld.models.base import BatchResult, DocBatch, FitTest, StatsDelta
from noveld.models.dpmm import (
    DPMM,
    DPMMConfig,
    UncountedWords,
    absorption_gains,
    apply_additions,
    decay_factor,
    finish_delta,
    greedy_absorptions,
    no_uncounted_words,
)
from noveld.models.kernels import hdp as kern
from noveld.models.kernels import hdp_moves as moves
from noveld.models.kernels import hdp_sampler as smp
from noveld.models.kernels import hdp_scores as scores
from noveld.models.kernels import multinomial as mkern
from noveld.models.suffstats import MultinomialStats
from noveld.models.vocabulary import RESERVED_PREFIX

TOPIC_SLOT = (1 << 20) - 2  # uid slot of topics (known labels use 2^20 − 1)
TOPIC_PREFIX = RESERVED_PREFIX + "topic/"  # vocabulary entries no input token can be


def topic_uid(topic: int) -> int:
    """Cluster uid of topic ``topic``: fixed, so every replica and restart agrees."""
    return (TOPIC_SLOT << 40) | topic


def topic_token(topic: int) -> str:
    """The reserved vocabulary entry standing for topic ``topic`` in category–topic counts."""
    return f"{TOPIC_PREFIX}{topic}"


#: Gamma(shape, rate) priors of γ (categories) and α (tables per document): paper 000 §4.2's
#: a_γ = 1, b_γ = 0.001 and a_α = 5, b_α = 0.1, read as rates (read as scales, b_γ = 0.001 would
#: pin γ near zero); the auxiliary-variable updates below draw from their posteriors
GAMMA_PRIOR = (1.0, 0.001)
ALPHA_PRIOR = (5.0, 0.1)
CONCENTRATION_ITERS = 20  # auxiliary-variable iterations per batch


def resample_dp_concentration(
    value: float,
    clusters: int,
    items: float,
    rng: np.random.Generator,
    iters: int,
    prior: tuple[float, float] = GAMMA_PRIOR,
) -> float:
    """γ | K clusters among n items: Escobar & West (1995) auxiliary variable, ``iters`` steps.

    η ~ Beta(γ+1, n); with odds π/(1−π) = (a+K−1) / (n (b − log η)),
    γ ~ π Gamma(a+K, b − log η) + (1−π) Gamma(a+K−1, b − log η). Its stationary law is
    p(γ | K, n) ∝ p(γ) γ^K Γ(γ)/Γ(γ+n) (the CRP's likelihood of K clusters).
    """
    a, b = prior
    if clusters < 1 or items <= 0:
        return value
    for _ in range(iters):
        eta = rng.beta(value + 1.0, items)
        rate = b - math.log(max(eta, 1e-300))
        odds = (a + clusters - 1.0) / (items * rate)
        shape = a + clusters if rng.random() < odds / (1.0 + odds) else a + clusters - 1.0
        value = float(rng.gamma(shape, 1.0 / rate))
    return max(value, 1e-6)


def resample_py_concentration(
    value: float,
    discount: float,
    clusters: int,
    items: float,
    rng: np.random.Generator,
    iters: int,
    prior: tuple[float, float] = GAMMA_PRIOR,
) -> float:
    """θ of a Pitman–Yor process with discount d, given K clusters among n items: Teh (2006,
    "A Bayesian interpretation of interpolated Kneser–Ney", appendix C) auxiliary variables
    x ~ Beta(θ+1, n−1), y_i ~ Bernoulli(θ / (θ + d·i)) for i < K;
    θ ~ Gamma(a + Σ y_i, b − log x). Its stationary law is
    p(θ | K, n) ∝ p(θ) Π_{i<K} (θ + d·i) Γ(θ+1)/Γ(θ+n) (the PY EPPF's θ part)."""
    a, b = prior
    if clusters < 2 or items <= 1.0:
        return value
    steps = discount * np.arange(1, clusters, dtype=np.float64)
    for _ in range(iters):
        x = rng.beta(value + 1.0, items - 1.0)
        ys = rng.random(clusters - 1) < value / (value + steps)
        rate = b - math.log(max(x, 1e-300))
        value = float(rng.gamma(a + float(ys.sum()), 1.0 / rate))
    return max(value, 1e-6)


def resample_top_concentration(
    value: float, discount: float, clusters: int, items: float, rng: np.random.Generator
) -> float:
    """γ of the category level: Escobar & West for the DP (d = 0), Teh's scheme for d > 0."""
    if discount == 0.0:
        return resample_dp_concentration(value, clusters, items, rng, CONCENTRATION_ITERS)
    return resample_py_concentration(value, discount, clusters, items, rng, CONCENTRATION_ITERS)


def resample_group_concentration(
    value: float,
    tables: np.ndarray,
    customers: np.ndarray,
    rng: np.random.Generator,
    iters: int,
    prior: tuple[float, float] = ALPHA_PRIOR,
) -> float:
    """α | tables m_j and customers n_j of groups j (documents): Teh et al. (2006, HDP,
    appendix A) auxiliary variables w_j ~ Beta(α+1, n_j), s_j ~ Bernoulli(n_j / (n_j + α));
    α ~ Gamma(a + Σm_j − Σs_j, b − Σ log w_j)."""
    a, b = prior
    keep = customers > 0
    tables, customers = tables[keep], customers[keep].astype(np.float64)
    if tables.shape[0] == 0:
        return value
    for _ in range(iters):
        w = rng.beta(value + 1.0, customers)
        s = rng.random(customers.shape[0]) < customers / (customers + value)
        shape = a + float(tables.sum()) - float(s.sum())
        rate = b - float(np.log(np.maximum(w, 1e-300)).sum())
        value = float(rng.gamma(max(shape, 1e-6), 1.0 / rate))
    return max(value, 1e-6)


def is_topic(uids: np.ndarray) -> np.ndarray:
    """Which of ``uids`` are topics."""
    mask: np.ndarray = (uids >> 40) == TOPIC_SLOT
    return mask


def live_clusters(stats: MultinomialStats) -> int:
    """Live clusters of any model, hdp's topics left out (they are not categories: progress,
    ``noveld_clusters_active`` and ``state show`` count what ``max_active_clusters`` bounds)."""
    k = stats.kmax
    return int((stats.alive[:k] & ~is_topic(stats.uid[:k])).sum())


@dataclass(frozen=True)
class HDPConfig:
    """Hyperparameters (all in the model fingerprint): L topics, Dirichlet priors β (topic–word)
    and ζ (category–topic), the per-document table concentration α and the category
    concentration γ (starting values when they are resampled), the blocked k-step, Gibbs sweeps
    per batch, forgetting and retirement as in ``dpmm``.

    Short texts want many topics and a small ζ: a category then keeps to a few topics of its
    own (one per story, for news), and L should exceed the number of live categories by a
    margin (a new category claims an unused topic), with L·ζ = 1 (docs/model.md, "hdp")."""

    topics: int = 2000
    beta: float = 0.01
    zeta: float = 5e-4  # L·ζ = 1: unused topics weigh one token's worth in a category
    context_prior: float = 0.1  # η of each category's Dirichlet–categorical context fields
    table_alpha: float = 1.0
    gamma: float = 10.0
    discount: float = 0.5  # Pitman–Yor discount of the category level (0: the DP of paper 000)
    resample_concentrations: bool = True
    blocked: bool = True
    split: bool = True
    merge: bool = True
    absorb_margin: float = 20.0  # log-odds a category needs to be merged into a known one
    sweeps: int = 2
    deterministic: bool = True
    half_life_docs: float = 0.0
    retire_min_mass: float = 0.05
    max_active_clusters: int = 5000
    prune_below: float = DPMMConfig.prune_below


class HDP:
    """One mini-batch at a time: CRF seating plus Gibbs sweeps of t, y and k over the batch
    (paper 000 eqs. 3–7); earlier batches are fixed and enter only through their counts."""

    kind = "hdp"

    def __init__(self, config: HDPConfig) -> None:
        self.config = config
        self.topic_words: np.ndarray | None = None
        #: context values and fields in the vocabulary, for pruning (bound by the pipeline)
        self.uncounted_words: UncountedWords = no_uncounted_words
        self.last_concentrations = (config.table_alpha, config.gamma)  # (α, γ) of the last batch

    def new_state(self) -> MultinomialStats:
        """Empty statistics."""
        return MultinomialStats()

    def bind_topic_words(self, ids: list[int]) -> None:
        """Vocabulary ids of the reserved topic entries (``topic_token(l)`` for l < L)."""
        if len(ids) != self.config.topics:
            raise ValueError(f"need {self.config.topics} topic word ids, got {len(ids)}")
        self.topic_words = np.asarray(ids, dtype=np.int64)

    def partial_fit(
        self,
        batch: DocBatch,
        stats: MultinomialStats,
        rng: np.random.Generator,
        known: np.ndarray | None = None,
        pinned: Collection[int] = (),
    ) -> BatchResult:
        """Seat a batch in the franchise; return categories, births and the additive delta.

        ``known[d] ≥ 0`` is the uid of document d's known category: all its words sit at one
        table serving it. Categories in ``pinned`` are never retired.
        """
        if self.topic_words is None:
            raise RuntimeError("hdp: bind_topic_words must be called before partial_fit")
        cfg = self.config
        nb = len(batch)
        f = decay_factor(cfg.half_life_docs, nb)
        tokens = np.repeat(batch.words, batch.counts).astype(np.int64)
        doc_ptr = np.zeros(nb + 1, dtype=np.int64)
        np.cumsum(batch.lengths, out=doc_ptr[1:])
        bwords, tok_local, word_tokens = np.unique(tokens, return_inverse=True, return_counts=True)
        n_tok = tokens.shape[0]
        vocab_size = batch.n_words  # V: the topic and context entries are not words
        alpha, gamma = cfg.table_alpha, cfg.gamma
        uniforms = rng.random(smp.uniforms_needed(n_tok, nb, cfg.sweeps))
        tok_y = np.zeros(n_tok, dtype=np.int64)
        tok_t = np.zeros(n_tok, dtype=np.int64)
        tabs = tuple(np.zeros(n_tok * (1 + cfg.sweeps) + nb, dtype=np.int64) for _ in range(3))
        log_pred = np.full(nb, np.nan)  # each unlabelled document's first-pass log predictive
        room = nb + 64
        while True:
            loc = _BatchState.gather(self.topic_words, stats, f, bwords, word_tokens, known,
                                     cfg.topics, vocab_size * cfg.beta, room, nb,
                                     batch)  # fmt: skip
            if cfg.resample_concentrations:  # γ | categories and tables so far
                gamma = resample_top_concentration(
                    cfg.gamma, cfg.discount, loc.n_existing, float(loc.mk.sum()), rng
                )
            n_tab = self._sample(loc, doc_ptr, tok_local, uniforms, vocab_size, alpha, gamma,
                                 tok_y, tok_t, tabs, 0, 0, 0, log_pred)  # fmt: skip
            if n_tab >= 0:
                n_tab = self._group_moves(loc, doc_ptr, tok_local, vocab_size, gamma, tok_y,
                                          tok_t, tabs, n_tab)  # fmt: skip
            if n_tab >= 0 and cfg.sweeps > 0:
                if cfg.resample_concentrations:  # α | the batch's seating
                    alpha = self._resample_alpha(alpha, doc_ptr, tabs[0], tabs[2], n_tab, rng)
                n_tab = self._sample(loc, doc_ptr, tok_local, uniforms, vocab_size, alpha,
                                     gamma, tok_y, tok_t, tabs, cfg.sweeps, 1, n_tab,
                                     log_pred)  # fmt: skip
            if n_tab >= 0:
                break
            room *= 2  # more categories opened than there was room for: redo with more
        tab_doc, tab_k, tab_size = tabs
        cat_uid = loc.uid
        n_existing = loc.n_existing
        ctl = loc.ctl
        self.last_concentrations = (alpha, gamma)
        # --- what the batch added, in true units
        tok_cat = tab_k[tok_t]
        assign_local = np.empty(nb, dtype=np.int64)
        for d in range(nb):
            cats = tok_cat[doc_ptr[d] : doc_ptr[d + 1]]
            assign_local[d] = np.bincount(cats).argmax() if cats.shape[0] else 0
        assignments = cat_uid[assign_local]
        open_tables = np.flatnonzero(tab_size > 0)
        tab_uids = cat_uid[tab_k[open_tables]]
        serving = set(tab_k[open_tables].tolist())
        born_local = [k for k in range(n_existing, int(ctl[scores.CATS])) if k in serving]
        born = self._births(born_local, assign_local, tab_doc, tab_k, open_tables, cat_uid)
        ctx_uids = cat_uid[tab_k[loc.cx[5]]]  # the category carrying each document's context
        delta = self._delta(batch, tokens, tok_y, cat_uid[tok_cat], tab_uids, f, born, nb, ctx_uids)
        apply_additions(stats, delta)
        retired = self._retire(stats, pinned)
        gone = [u for u, _, _ in retired]
        absorbed = self._absorb_into_known(stats, assignments, pinned, gamma, set(gone), batch)
        born_here = {b[0] for b in born}
        if absorbed:
            into = dict(absorbed)
            assignments = np.array([into.get(u, u) for u in assignments.tolist()], np.int64)
            born = [b for b in born if b[0] not in into]
        delta = replace(
            delta,
            retired_uids=np.array(gone + [a for a, _ in absorbed], np.int64),
            merges=np.array(absorbed, dtype=np.int64).reshape(-1, 2),
        )  # born_uids keep absorbed births, so a replica's uid counter passes them too
        finish_delta(stats, delta, cfg.half_life_docs, cfg.prune_below, self.uncounted_words)
        seated = ~np.isnan(log_pred)  # the unlabelled documents
        tokens_seated = float(batch.lengths[seated].sum())
        lpt = float(log_pred[seated].sum()) / tokens_seated if tokens_seated else float("nan")
        merged = [(a, b, a in born_here) for a, b in absorbed]
        return BatchResult(assignments, born, retired, delta, lpt, merged=merged)

    def _absorb_into_known(
        self,
        stats: MultinomialStats,
        assignments: np.ndarray,
        pinned: Collection[int],
        gamma: float,
        fading: set[int],
        batch: DocBatch,
    ) -> list[tuple[int, int]]:
        """(category uid, known category uid) merges: other categories absorbed into the known
        categories this batch's documents went to (:meth:`DPMM._absorb_into_known`).

        A twin category claimed topics of its own, so it shares none with its known category
        and a test on category–topic counts cannot see that they are one story. The test is
        therefore ``dpmm``'s merge test on each category's expected word counts
        ``Σ_l O_kl φ_l(w)`` (φ_l the topic's word distribution, its counts normalised), with
        the tables' Pitman–Yor prior; a merge moves the category–topic counts and tables, so the
        topics and their words are untouched. Applied by :func:`finish_delta`, like a replica's.
        """
        cfg = self.config
        if not pinned or not cfg.merge or self.topic_words is None:
            return []
        kmax = stats.kmax
        uids = stats.uid[:kmax]
        category = stats.alive[:kmax] & ~is_topic(uids)
        is_known = category & np.isin(uids, np.fromiter(pinned, dtype=np.int64))
        in_batch = np.isin(uids, assignments)
        if not np.any(is_known & in_batch):
            return []
        expected = self._expected_word_stats(stats, category, batch.vocab_size)
        cats = np.flatnonzero(category)  # slot j of ``expected`` is category slot cats[j]
        touched = np.flatnonzero((is_known & in_batch)[cats]).astype(np.int64)
        eligible = ~is_known[cats] & ~np.isin(uids[cats], np.fromiter(fading, dtype=np.int64))
        log_new = math.log(gamma + cfg.discount * (cats.shape[0] - 1))
        gains = absorption_gains(
            expected, touched, eligible, np.arange(batch.vocab_size, dtype=np.int64), cfg.beta,
            batch.n_words * cfg.beta, log_new, cfg.discount,
        )  # fmt: skip
        pairs = greedy_absorptions(gains, touched, cfg.absorb_margin, set())
        return [(int(uids[cats[src]]), int(uids[cats[dst]])) for src, dst in pairs]

    def _expected_word_stats(
        self, stats: MultinomialStats, category: np.ndarray, vocab_size: int
    ) -> MultinomialStats:
        """Statistics whose cluster j is category ``flatnonzero(category)[j]``: its tables as
        ``m`` and its expected word counts ``Σ_l O_kl n_lw / n_l`` (true units)."""
        assert self.topic_words is not None
        kmax = stats.kmax
        w, k, c = mkern.postings_entries(stats.head, stats.nxt, stats.pk, stats.pc, vocab_size)
        c = c * stats.scale
        cats = np.flatnonzero(category)
        row_of = np.full(kmax, -1, dtype=np.int64)
        row_of[cats] = np.arange(cats.shape[0])
        topic_of_word = np.full(max(vocab_size, int(self.topic_words.max()) + 1), -1, np.int64)
        topic_of_word[self.topic_words] = np.arange(self.topic_words.shape[0])
        slot_of_topic = np.full(self.topic_words.shape[0], -1, dtype=np.int64)
        topic_slots = np.flatnonzero(stats.alive[:kmax] & is_topic(stats.uid[:kmax]))
        slot_of_topic[stats.uid[topic_slots] & ((1 << 40) - 1)] = topic_slots
        # category–topic counts O_kl, and each topic's words n_lw over n_l
        ct = (row_of[k] >= 0) & (topic_of_word[w] >= 0)
        cat_row, cat_topic_slot, o = row_of[k[ct]], slot_of_topic[topic_of_word[w[ct]]], c[ct]
        tw = np.isin(k, topic_slots) & (topic_of_word[w] < 0)
        t_slot, t_word, t_raw = k[tw], w[tw], c[tw]
        per_topic = np.bincount(t_slot, weights=t_raw, minlength=kmax)  # n_l
        t_count = t_raw / np.maximum(per_topic[t_slot], 1e-300)
        order = np.argsort(t_slot, kind="stable")
        t_slot, t_word, t_count = t_slot[order], t_word[order], t_count[order]
        starts = np.searchsorted(t_slot, cat_topic_slot)
        ends = np.searchsorted(t_slot, cat_topic_slot, side="right")
        lens = ends - starts
        idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        rows = np.repeat(cat_row, lens)
        words = t_word[idx]
        counts = t_count[idx] * np.repeat(o, lens)
        out = MultinomialStats()
        n = cats.shape[0]
        out.reserve(n, int(words.shape[0]), vocab_size)
        out.m[:n] = stats.m[cats] * stats.scale
        out.alive[:n] = True
        out.uid[:n] = np.arange(n)
        out.ntok[:n] = np.bincount(rows, weights=counts, minlength=n)
        out.ictl[mkern.KMAX] = n
        mkern.add_word_counts(rows, words, counts, out.head, out.nxt, out.pk, out.pc, out.ictl)
        return out

    def term_weights(self, stats: MultinomialStats, uid: int) -> tuple[np.ndarray, np.ndarray]:
        """Expected word counts of category ``uid``: ``Σ_l O_kl φ_l(w)`` (topics' words only;
        a category retired in this step still has its counts until the next compaction)."""
        slot = stats.slot_of(uid, retired_too=True)
        if slot < 0 or self.topic_words is None:
            return np.zeros(0, np.int64), np.zeros(0)
        tw, tc = stats.word_counts(slot)
        topic_of_word = {int(w): i for i, w in enumerate(self.topic_words.tolist())}
        acc: dict[int, float] = {}
        for w, o in zip(tw.tolist(), tc.tolist(), strict=True):
            tslot = stats.slot_of(topic_uid(topic_of_word.get(int(w), -1)))
            if tslot < 0:
                continue
            ws, cs = stats.word_counts(tslot)
            total = float(cs.sum())
            if total <= 0:
                continue
            for x, c in zip(ws.tolist(), (o * cs / total).tolist(), strict=True):
                acc[x] = acc.get(x, 0.0) + c
        words = np.fromiter(acc.keys(), dtype=np.int64, count=len(acc))
        weights = np.fromiter(acc.values(), dtype=np.float64, count=len(acc))
        return words, weights

    def refound_test(self, stats: MultinomialStats, batch: DocBatch) -> FitTest:
        """:meth:`still_belongs` on the live statistics, with the batch's V."""
        n_words = batch.n_words

        def fits(uid: int, words: np.ndarray, counts: np.ndarray) -> bool:
            return self.still_belongs(words, counts, uid, stats, n_words)

        return fits

    def still_belongs(
        self, words: np.ndarray, counts: np.ndarray, uid: int, stats: MultinomialStats, n_words: int
    ) -> bool:
        """Would a member of category ``uid`` be seated there again, taken out of it? The
        first pass's eq. 6 (topics summed out, MAP) on the live counts with the member's tokens
        and table removed (:func:`smp.reseat_member`); read-only. ``n_words`` is V (the
        vocabulary's words, no reserved entries).

        The novelty tracker asks this of a candidate's first members at confirmation, as it
        asks :meth:`DPMM.still_belongs`: a stray document that opened a category a later story
        took over is not that story's first document."""
        slot = stats.slot_of(uid)
        if slot < 0 or self.topic_words is None:
            return False
        if stats.m[slot] * stats.scale - 1.0 <= 0.0:
            return True  # its only member: nothing else to compare with
        cfg = self.config
        tokens = np.repeat(words, counts).astype(np.int64)
        if tokens.shape[0] == 0:
            return False
        bwords, tok_local, word_tokens = np.unique(tokens, return_inverse=True, return_counts=True)
        one = DocBatch(
            ptr=np.array([0, words.shape[0]], dtype=np.int64),
            words=words.astype(np.int64),
            counts=counts.astype(np.int64),
            lengths=np.array([tokens.shape[0]], dtype=np.int64),
            vocab_size=n_words,
        )
        loc = _BatchState.gather(self.topic_words, stats, 1.0, bwords, word_tokens, None,
                                 cfg.topics, n_words * cfg.beta, 1, 1, one)  # fmt: skip
        local = np.flatnonzero(loc.uid[: loc.n_existing] == uid)
        if local.shape[0] == 0:
            return False
        k = int(local[0])
        loc.tw[3][0] = loc.tw[2].sum()
        gamma = self.last_concentrations[1]
        chosen = smp.reseat_member(tok_local.astype(np.int64), k, cfg.zeta, cfg.beta,
                                   n_words * cfg.beta, gamma, loc.tw, loc.cat, loc.ix,
                                   loc.ctl, cfg.discount)  # fmt: skip
        return int(chosen) == k

    # ---- internals ------------------------------------------------------------------------
    def _group_moves(
        self,
        loc: _BatchState,
        doc_ptr: np.ndarray,
        tok_local: np.ndarray,
        vocab_size: int,
        gamma: float,
        tok_y: np.ndarray,
        tok_t: np.ndarray,
        tabs: tuple[np.ndarray, ...],
        n_tab: int,
    ) -> int:
        """After the seating: bursts out of older categories (``split``), then merges of the
        batch's new categories (``merge``); −1 when a move needed more category room."""
        cfg = self.config
        common = (cfg.beta, vocab_size * cfg.beta, cfg.zeta, gamma, loc.tw, loc.cat, loc.ix,
                  loc.ctl, tok_y, tok_t, tabs)  # fmt: skip
        scratch = moves.scratch_for(tok_local.shape[0])
        if cfg.split:
            moved = moves.split_bursts(doc_ptr, tok_local, loc.known_local, loc.n_existing,
                                       *common, n_tab, cfg.context_prior, loc.cx,
                                       scratch, cfg.discount)  # fmt: skip
            if moved < 0:
                return -1
        if cfg.merge:  # one round: each birth merges once at most (more rounds measured worse)
            merged = moves.merge_births(doc_ptr, tok_local, loc.n_existing, *common,
                                        cfg.context_prior, loc.cx, scratch,
                                        cfg.discount)  # fmt: skip
            if merged < 0:
                return -1
        return n_tab

    def _sample(
        self,
        loc: _BatchState,
        doc_ptr: np.ndarray,
        tok_local: np.ndarray,
        uniforms: np.ndarray,
        vocab_size: int,
        alpha: float,
        gamma: float,
        tok_y: np.ndarray,
        tok_t: np.ndarray,
        tabs: tuple[np.ndarray, ...],
        n_sweeps: int,
        first_sweep: int,
        n_tab: int,
        log_pred: np.ndarray,
    ) -> int:
        """One call of the batch sampler on the densified state (see :func:`smp.sample_batch`)."""
        cfg = self.config
        return int(
            smp.sample_batch(
                doc_ptr,
                tok_local,
                loc.known_local,
                n_sweeps,
                first_sweep,
                uniforms,
                cfg.deterministic,
                cfg.blocked,
                cfg.beta,
                vocab_size * cfg.beta,
                cfg.zeta,
                alpha,
                gamma,
                loc.tw,
                loc.cat,
                loc.ix,
                loc.ctl,
                tok_y,
                tok_t,
                tabs,
                n_tab,
                log_pred,
                cfg.context_prior,
                loc.cx,
                cfg.discount,
            )
        )

    @staticmethod
    def _resample_alpha(
        alpha: float,
        doc_ptr: np.ndarray,
        tab_doc: np.ndarray,
        tab_size: np.ndarray,
        n_tab: int,
        rng: np.random.Generator,
    ) -> float:
        """α given each document's open tables and tokens after the first pass."""
        n_docs = doc_ptr.shape[0] - 1
        open_t = np.flatnonzero(tab_size[:n_tab] > 0)
        tables = np.bincount(tab_doc[open_t], minlength=n_docs).astype(np.float64)
        return resample_group_concentration(
            alpha, tables, np.diff(doc_ptr), rng, CONCENTRATION_ITERS
        )

    @staticmethod
    def _births(
        born_local: list[int],
        assign_local: np.ndarray,
        tab_doc: np.ndarray,
        tab_k: np.ndarray,
        open_tables: np.ndarray,
        cat_uid: np.ndarray,
    ) -> list[tuple[int, int, float]]:
        """(uid, founding document, score) of the categories opened in this batch: the first
        document it is the category of, else the first with a table serving it. The score is
        the share of the batch's tables the new category serves (no single seating margin
        exists when a document's words may sit at several tables)."""
        out: list[tuple[int, int, float]] = []
        n_tables = max(int(open_tables.shape[0]), 1)
        for k in born_local:
            docs = np.flatnonzero(assign_local == k)
            serving = open_tables[tab_k[open_tables] == k]
            d = int(docs[0]) if docs.shape[0] else int(tab_doc[serving].min())
            out.append((int(cat_uid[k]), d, float(serving.shape[0]) / n_tables))
        return sorted(out, key=lambda b: b[1])

    def _delta(
        self,
        batch: DocBatch,
        tokens: np.ndarray,
        tok_y: np.ndarray,
        tok_cat_uid: np.ndarray,
        tab_uids: np.ndarray,
        f: float,
        born: list[tuple[int, int, float]],
        n_docs: int,
        ctx_uids: np.ndarray,
    ) -> StatsDelta:
        """Additions of one batch: per token, +1 to (topic y, word) and to (category, topic
        y's entry); +1 table per open table to its category's ``m``; per context field of a
        document, +1 to (its category, the value's entry) and (its category, the field's)."""
        assert self.topic_words is not None
        n_tok = tokens.shape[0]
        topic_uids = (TOPIC_SLOT << 40) | tok_y.astype(np.int64)  # topic_uid, vectorised
        unit_uids = np.concatenate([tab_uids, topic_uids, tok_cat_uid]).astype(np.int64)
        unit_m = np.concatenate([np.ones(tab_uids.shape[0]), np.zeros(2 * n_tok)])
        unit_n = np.concatenate([np.zeros(tab_uids.shape[0]), np.ones(2 * n_tok)])
        ctx_cat = np.zeros(0, dtype=np.int64)
        ctx_words = np.zeros(0, dtype=np.int64)
        if (
            batch.ctx_ptr is not None
            and batch.ctx_value is not None
            and batch.ctx_field is not None
        ):
            per_doc = np.repeat(ctx_uids, np.diff(batch.ctx_ptr))
            ctx_cat = np.concatenate([per_doc, per_doc])
            ctx_words = np.concatenate([batch.ctx_value, batch.ctx_field])
        e_uids = np.concatenate([topic_uids, tok_cat_uid, ctx_cat]).astype(np.int64)
        e_words = np.concatenate([tokens, self.topic_words[tok_y], ctx_words]).astype(np.int64)
        delta = DPMM._delta_from_entries(
            batch,
            unit_uids,
            unit_m,
            unit_n,
            e_uids,
            e_words,
            np.ones(e_uids.shape[0]),
            f,
            born,
            [],
            [],
            MultinomialStats(),
        )
        return replace(delta, n_docs=n_docs)

    def _retire(
        self, stats: MultinomialStats, pinned: Collection[int]
    ) -> list[tuple[int, float, str]]:
        """Categories (never topics or known ones) whose decayed table mass fell below
        ``retire_min_mass``, then the lightest beyond ``max_active_clusters``. Like ``dpmm``'s,
        but decided before the retirement is applied, so the delta can carry it."""
        cfg = self.config
        kmax = stats.kmax
        slots = np.flatnonzero(stats.alive[:kmax] & ~is_topic(stats.uid[:kmax]))
        if pinned:
            slots = slots[~np.isin(stats.uid[slots], np.fromiter(pinned, dtype=np.int64))]
        mass = stats.mass(slots)
        faded = slots[mass < cfg.retire_min_mass]
        keep = slots[~np.isin(slots, faded)]
        excess = keep.shape[0] - cfg.max_active_clusters
        evicted = keep[np.lexsort((keep, stats.mass(keep)))[:excess]] if excess > 0 else keep[:0]
        out = [(int(stats.uid[k]), float(stats.mass(np.array([k]))[0]), "faded") for k in faded]
        out += [
            (int(stats.uid[k]), float(stats.mass(np.array([k]))[0]), "evicted") for k in evicted
        ]
        return out


@dataclass
class _BatchState:
    """The statistics one batch samples against, densified: topic–word counts of the batch's
    words with each word's topic list, topic totals, and category–topic counts with room for
    categories the batch opens, with both sparse indexes (layout:
    :mod:`noveld.models.kernels.hdp_scores`). Local categories are ordered by uid (MAP ties:
    the oldest)."""

    tw: tuple[np.ndarray, ...]  # (nlw, nl, inv, Σ inv)
    cat: tuple[np.ndarray, ...]  # (okl, ok, mk, alive, uid)
    ix: tuple[np.ndarray, ...]  # (nz, nzlen, innz, cz, czlen, wz, wz_ptr, wzlen)
    ctl: np.ndarray
    known_local: np.ndarray
    n_existing: int
    cx: tuple[np.ndarray, ...]  # (ctx_ptr, value column, field column, U, counts, context table)

    @property
    def uid(self) -> np.ndarray:
        """Local category → uid."""
        return self.cat[4]

    @property
    def mk(self) -> np.ndarray:
        """Tables per local category."""
        return self.cat[2]

    @classmethod
    def gather(
        cls,
        topic_words: np.ndarray,
        stats: MultinomialStats,
        decay: float,
        bwords: np.ndarray,
        word_tokens: np.ndarray,
        known: np.ndarray | None,
        n_topics: int,
        vbeta: float,
        room: int,
        n_docs: int,
        batch: DocBatch,
    ) -> _BatchState:
        """Densify what the batch needs (statistics decayed by ``decay``), with ``room`` more
        categories than exist; ``word_tokens[j]`` is how many tokens batch word j has. The
        categories' counts of the batch's context entries are columns of ``cx[4]``."""
        g = stats.scale * decay
        kmax = stats.kmax
        uids = stats.uid[:kmax]
        alive = stats.alive[:kmax]
        topic_mask = is_topic(uids)
        topic_of_slot = np.full(kmax, -1, dtype=np.int64)
        topic_slots = np.flatnonzero(alive & topic_mask)
        topic_numbers = uids[topic_slots] & ((1 << 40) - 1)
        topic_of_slot[topic_slots] = topic_numbers
        nl = np.zeros(n_topics)
        nl[topic_numbers] = stats.ntok[topic_slots] * g
        inv = 1.0 / (vbeta + nl)
        cat_slots = np.flatnonzero(alive & ~topic_mask)
        cat_uids = uids[cat_slots].tolist()
        if known is not None:  # known categories not in the pool yet (opened empty)
            cat_uids += sorted({int(u) for u in known[known >= 0].tolist()} - set(cat_uids))
        cat_uids.sort()
        local_of_uid = {u: i for i, u in enumerate(cat_uids)}
        n_existing = len(cat_uids)
        cap = n_existing + room
        cat_of_slot = np.full(kmax, -1, dtype=np.int64)
        rows = np.array([local_of_uid[int(u)] for u in uids[cat_slots].tolist()], dtype=np.int64)
        cat_of_slot[cat_slots] = rows
        nlw = np.zeros((bwords.shape[0], n_topics))
        okl = np.zeros((cap, n_topics))
        ix = kern.gather_indexed(bwords, topic_words, stats.head, stats.nxt, stats.pk, stats.pc,
                                 topic_of_slot, cat_of_slot, g, word_tokens, nlw, okl)  # fmt: skip
        ok = np.zeros(cap)
        mk = np.zeros(cap)
        ok[rows] = stats.ntok[cat_slots] * g
        mk[rows] = stats.m[cat_slots] * g
        cat_alive = np.zeros(cap, dtype=np.bool_)
        cat_alive[:n_existing] = True
        cat_uid = np.full(cap, -1, dtype=np.int64)
        cat_uid[:n_existing] = cat_uids
        known_local = np.full(n_docs, -1, dtype=np.int64)
        if known is not None:
            for d in np.flatnonzero(known >= 0).tolist():
                known_local[d] = local_of_uid[int(known[d])]
        empty = np.flatnonzero(nl < scores.EMPTY_BELOW)
        ctl = np.zeros(scores.CTL_SIZE, dtype=np.int64)
        ctl[scores.CATS] = n_existing
        ctl[scores.NEXT_UID] = int(stats.ictl[mkern.NEXT_UID])
        ctl[scores.N_EMPTY] = empty.shape[0]
        ctl[scores.FIRST_EMPTY] = int(empty[0]) if empty.shape[0] else -1
        return cls(
            (nlw, nl, inv, np.array([inv.sum()])),
            (okl, ok, mk, cat_alive, cat_uid),
            ix,
            ctl,
            known_local,
            n_existing,
            _context_counts(batch, stats, g, cat_of_slot, cap, n_docs),
        )


def _context_counts(
    batch: DocBatch,
    stats: MultinomialStats,
    scale: float,
    cat_of_slot: np.ndarray,
    cap: int,
    n_docs: int,
) -> tuple[np.ndarray, ...]:
    """The sampler's context bundle: each document's entries as columns of a dense
    (category × the batch's context entries) count matrix, and a slot for the table carrying
    each document's context."""
    ctx_tab = np.zeros(n_docs, dtype=np.int64)
    if batch.ctx_ptr is None or batch.ctx_value is None or batch.ctx_field is None:
        none = np.zeros(0, dtype=np.int64)
        return (
            np.zeros(n_docs + 1, dtype=np.int64), none, none, np.zeros(0), np.zeros((cap, 0)),
            ctx_tab,
        )  # fmt: skip
    cols = np.unique(np.concatenate([batch.ctx_value, batch.ctx_field]))
    counts = np.zeros((cap, cols.shape[0]))
    kern.gather_postings(cols, stats.head, stats.nxt, stats.pk, stats.pc, cat_of_slot, scale,
                         counts)  # fmt: skip
    return (
        batch.ctx_ptr.astype(np.int64),
        np.searchsorted(cols, batch.ctx_value).astype(np.int64),
        np.searchsorted(cols, batch.ctx_field).astype(np.int64),
        np.asarray(batch.ctx_card, dtype=np.float64),
        counts,
        ctx_tab,
    )
