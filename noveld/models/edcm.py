"""The ``dpmm`` model under the EDCM likelihood: CRP seating of bursty word counts.

Another likelihood in the same CRP seating as the multinomial one; paper 002 eq. 2 (Elkan 2006).
The EDCM approximates the Dirichlet compound multinomial: it scores *which* words a document
uses, and a word repeated within a document costs little more than one occurrence — suited to
long documents where words come in bursts. Cluster parameters are Elkan's fixed point smoothed
toward a prior (:mod:`noveld.models.kernels.edcm`): the symmetric ``b0`` for short texts and, as
the corpus's documents grow long, the corpus-wide EDCM (:func:`background_prior`), so that a new
cluster predicts the words every document uses as well as an old one does.

Storage reuses the count store: a document adds 1 to each of its distinct words (document
frequencies) and 1 to a reserved length-bin entry (:func:`length_token`), so snapshots, the
Redis delta log, replay across replicas, forgetting and retirement carry the EDCM statistics
unchanged. Merges and burst splits are moves of the multinomial model and are off here.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from noveld.models.base import BatchResult, DocBatch, FitTest
from noveld.models.dpmm import DPMM, DPMMConfig, advance_documents, decay_factor, ensure_clusters
from noveld.models.edcm_prior import Prior, Shapes, background_prior, long_share
from noveld.models.kernels import edcm as ekern
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats

LENGTH_PREFIX = "\x00edcm/len/"
_BIN_LENGTHS = ekern.bin_lengths()


def length_token(b: int) -> str:
    """The reserved vocabulary entry counting a cluster's documents in length bin ``b``."""
    return f"{LENGTH_PREFIX}{b}"


@dataclass(frozen=True)
class EDCMConfig(DPMMConfig):
    """``dpmm`` with the EDCM likelihood: the DP mixture's settings plus the prior ``β_w = b0``
    (``prior``) and its weight in documents (``prior_docs``, c) for short texts, and the
    long-document prior (``long_prior``, ``long_prior_docs`` and the corpus EDCM's weight
    ``background_docs``, c') it moves to as the corpus's documents average from
    ``long_words`` to ``long_words_full`` distinct words (:func:`long_share`). ``beta`` is
    unused."""

    prior: float = 0.001
    prior_docs: float = 5.0
    long_words: float = 40.0  # u_lo: the long-document prior ramps in over ū in [u_lo, u_hi]
    long_words_full: float = 50.0  # u_hi
    long_prior: float = 0.003  # b0 of the long-document prior
    long_prior_docs: float = 40.0  # c of the long-document prior
    background_docs: float = 40.0  # c': the corpus EDCM's weight in the long-document prior
    merge: bool = False  # merges and burst splits are multinomial moves (not for the EDCM yet)
    split: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.prior <= 0 or self.prior_docs <= 0:
            raise ValueError("the EDCM prior and its weight in documents must be positive")
        if self.long_prior <= 0 or self.long_prior_docs <= 0 or self.background_docs < 0:
            raise ValueError("the EDCM long-document prior must be positive")
        if self.long_words > 0 and self.long_words_full < self.long_words:
            raise ValueError("long_words_full must be at least long_words")

        if self.merge or self.split:
            raise ValueError("merges and burst splits are not available with the EDCM")


class EDCMMixture(DPMM):
    """CRP seating under the EDCM likelihood, with Gibbs rejuvenation of the batch, forgetting,
    retirement and known labels as in :class:`DPMM`."""

    kind = "dpmm"
    likelihood = "edcm"
    config: EDCMConfig

    def __init__(self, config: EDCMConfig) -> None:
        super().__init__(config)
        self._bins: np.ndarray | None = None

    def bind_length_words(self, ids: list[int]) -> None:
        """Vocabulary ids of the reserved entries of :func:`length_token` (b < N_BINS)."""
        if len(ids) != ekern.N_BINS:
            raise ValueError(f"edcm: expected {ekern.N_BINS} length-bin ids")
        self._bins = np.asarray(ids, dtype=np.int64)

    def _bin_ids(self) -> np.ndarray:
        if self._bins is None:
            raise RuntimeError("edcm: bind_length_words must be called before partial_fit")
        return self._bins

    # ---- the EDCM view of a batch ---------------------------------------------------------
    def edcm_view(self, batch: DocBatch) -> tuple[DocBatch, np.ndarray]:
        """The batch as the store counts it — each document's distinct words, then its
        length-bin entry, all with count 1 — and each document's bin."""
        bins_of = np.array([ekern.length_bin(int(n)) for n in batch.lengths.tolist()], np.int64)
        nb = len(batch)
        per_doc = np.diff(batch.ptr) + 1
        ptr = np.zeros(nb + 1, dtype=np.int64)
        np.cumsum(per_doc, out=ptr[1:])
        words = np.empty(int(ptr[-1]), dtype=np.int64)
        last = ptr[1:] - 1
        is_word = np.ones(words.shape[0], dtype=np.bool_)
        is_word[last] = False
        words[is_word] = batch.words
        words[last] = self._bin_ids()[bins_of]
        view = DocBatch(
            ptr, words, np.ones(words.shape[0], dtype=np.int64), per_doc.astype(np.int64),
            batch.vocab_size, batch.reserved,
        )  # fmt: skip
        return view, bins_of

    def shapes(
        self, stats: MultinomialStats, n_words: int, batch: DocBatch | None = None
    ) -> Shapes:
        """Length histograms and solved shapes of every slot (read-only); the prior is centred
        on the live documents and, when given, those of ``batch`` (about to be seated)."""
        cap = stats.m.shape[0]
        hist = np.zeros((cap, ekern.N_BINS))
        ekern.gather_histograms(self._bin_ids(), stats.head, stats.nxt, stats.pk, stats.pc, hist)
        shape = np.zeros((cap, ekern.SHAPE_COLUMNS))
        cfg = self.config
        live = stats.alive[:cap].copy()
        live[stats.kmax :] = False
        g = stats.scale
        corpus_hist = hist[live].sum(axis=0) * g
        corpus_t = float(np.maximum(stats.ntok[live] - stats.m[live], 0.0).sum() * g)
        if batch is not None:
            for n in batch.lengths.tolist():
                corpus_hist[ekern.length_bin(int(n))] += 1.0
            corpus_t += batch.nnz
        prior = self.prior_of_corpus(corpus_hist, corpus_t, n_words)
        ekern.solve_shapes(
            hist, _BIN_LENGTHS, stats.m, stats.ntok, stats.alive, stats.kmax, g,
            prior.docs, prior.total, cfg.discount, shape,
        )  # fmt: skip
        return Shapes(hist, shape, prior, corpus_hist, corpus_t)

    def prior_of_corpus(self, hist: np.ndarray, t: float, n_words: int) -> Prior:
        """:func:`background_prior` of a corpus (length histogram ``hist``, ``t`` (document,
        distinct word) pairs, true counts) under this model's settings."""
        cfg = self.config
        r = long_share(hist, t, cfg.long_words, cfg.long_words_full)
        if r <= 0.0:
            return background_prior(hist, t, n_words, cfg.prior, cfg.prior_docs, 0.0)
        b0 = cfg.prior ** (1.0 - r) * cfg.long_prior**r
        c = cfg.prior_docs + r * (cfg.long_prior_docs - cfg.prior_docs)
        return background_prior(hist, t, n_words, b0, c, r * cfg.background_docs)

    @staticmethod
    def document_frequencies(stats: MultinomialStats, words: np.ndarray) -> np.ndarray:
        """How many live documents contain each of ``words`` (one walk of their postings)."""
        df = np.zeros(words.shape[0])
        ekern.document_frequencies(
            words, stats.head, stats.nxt, stats.pk, stats.pc, stats.alive, stats.scale, df
        )
        return df

    def pseudo_counts(self, stats: MultinomialStats, prior: Prior, words: np.ndarray) -> np.ndarray:
        """``c·b_w`` of each of ``words`` under ``prior``."""
        if prior.slope > 0.0:
            return prior.docs * prior.of(self.document_frequencies(stats, words))
        return np.full(words.shape[0], prior.docs * prior.const)

    # ---- the step -------------------------------------------------------------------------
    def partial_fit(
        self,
        batch: DocBatch,
        stats: MultinomialStats,
        rng: np.random.Generator,
        known: np.ndarray | None = None,
        pinned: Collection[int] = (),
    ) -> BatchResult:
        """Seat a batch, rejuvenate it, forget, retire; return assignments, births and the
        delta (the EDCM view's counts, so any replay equals this writer)."""
        cfg = self.config
        nb = len(batch)
        view, bins_of = self.edcm_view(batch)
        forced = ensure_clusters(stats, known, nb)
        self._pinned = pinned
        sweeps = cfg.rejuvenation_sweeps
        f = decay_factor(cfg.half_life_docs, nb)
        stats.decay(f)
        stats.reserve(nb * (1 + sweeps), view.nnz * (1 + sweeps), view.vocab_size)
        stats.fresh[:] = False
        sh = self.shapes(stats, batch.n_words, batch)
        if sh.prior.slope > 0.0:
            in_batch = np.bincount(batch.words, minlength=view.vocab_size).astype(np.float64)
            df = self.document_frequencies(stats, view.words) + in_batch[view.words]
            doc_cb = sh.prior.docs * sh.prior.of(df)
        else:
            doc_cb = np.full(view.nnz, sh.prior.docs * sh.prior.const)
        uniforms = rng.random(nb * (1 + sweeps))
        assign = np.empty(nb, dtype=np.int64)
        log_norm = np.empty(nb)
        margin = np.empty(nb)
        lp = np.empty(stats.m.shape[0])
        ekern.seat_batch(
            view.ptr, view.words, view.counts, view.lengths, batch.lengths, bins_of, uniforms,
            sweeps, self.log_alpha(nb), sh.prior.docs, doc_cb, sh.prior.total,
            cfg.deterministic,
            stats.scale, cfg.discount, stats.m, stats.ntok, stats.alive,
            stats.fresh, stats.uid, stats.head, stats.nxt, stats.pk, stats.pc, stats.free_stack,
            stats.ictl, sh.hist, _BIN_LENGTHS, sh.shape, lp, assign, log_norm, margin, forced,
        )  # fmt: skip
        born = self._births(assign, stats, margin)
        uids = stats.uid[assign]
        retired = self._retire(stats)
        advance_documents(stats, nb, cfg.half_life_docs, cfg.prune_below, self.uncounted_words)
        delta = self._delta(view, uids, f, born, retired, [], stats)
        total_mass = float(stats.m[stats.alive].sum() * stats.scale) - nb
        is_word = np.ones(view.nnz, dtype=np.bool_)
        is_word[view.ptr[1:] - 1] = False
        log_cb = float(np.log(doc_cb[is_word]).sum())
        lpt = self._edcm_log_predictive_per_token(batch, log_norm, max(total_mass, 0.0), nb, log_cb)
        return BatchResult(uids.copy(), born, retired, delta, lpt)

    def _edcm_log_predictive_per_token(
        self, batch: DocBatch, log_norm: np.ndarray, prior_mass: float, nb: int, log_cb: float
    ) -> float:
        """Mean log p(document | model before it) per token, from the first-pass normalisers:
        the seating weights omit ``log n! − Σ_w log x_w + Σ_w log(c·b_w)`` (``log_cb``, over
        the batch's (document, word) pairs) and the CRP's M + α."""
        tokens = float(batch.lengths.sum())
        if tokens == 0:
            return float("nan")
        lengths = batch.lengths.astype(np.float64)
        omitted = float(
            sum(math.lgamma(n + 1.0) for n in lengths.tolist())
            - np.log(batch.counts.astype(np.float64)).sum()
            + log_cb
        )
        alpha = math.exp(self.log_alpha(nb))
        norm = np.log(prior_mass + np.arange(nb) + alpha).sum()
        return (float(log_norm.sum()) + omitted - float(norm)) / tokens

    # ---- read-only questions --------------------------------------------------------------
    def scores(
        self,
        stats: MultinomialStats,
        sh: Shapes,
        words: np.ndarray,
        n: int,
        n_words: int,
        batch_size: int,
        cb: np.ndarray | None = None,
    ) -> tuple[np.ndarray, float]:
        """Log seating weights of a document (distinct ``words``, ``n`` tokens) into every slot
        below kmax, and the new-cluster weight (the kernel's formula); ``cb``: the words'
        ``c·b_w`` when not those of ``sh.prior`` on the live state."""
        cfg = self.config
        kmax = stats.kmax
        lp = np.empty(max(kmax, 1))
        w64 = words.astype(np.int64)
        if cb is None:
            cb = self.pseudo_counts(stats, sh.prior, w64)
        lp_new = ekern.score_document(
            w64, n, lp, stats.alive, sh.shape, stats.head, stats.nxt, stats.pk, stats.pc, kmax,
            stats.scale, sh.prior.docs, cb, sh.prior.total, self.log_alpha(batch_size),
            cfg.discount,
        )  # fmt: skip
        return lp[:kmax], float(lp_new)

    def predict(self, batch: DocBatch, stats: MultinomialStats) -> np.ndarray:
        """MAP cluster uid of each document without changing the statistics (-1 = new)."""
        stats.reserve(0, 0, batch.vocab_size)
        sh = self.shapes(stats, batch.n_words)
        out = np.empty(2)
        res = np.empty(len(batch), dtype=np.int64)
        for d in range(len(batch)):
            w, _ = batch.doc(d)
            lp, lp_new = self.scores(stats, sh, w, int(batch.lengths[d]), batch.n_words, len(batch))
            k = kern.choose(lp, stats.kmax, lp_new, 0.0, True, out, stats.uid)
            res[d] = -1 if k < 0 else stats.uid[k]
        return res

    def seating_probabilities(
        self,
        words: np.ndarray,
        counts: np.ndarray,
        stats: MultinomialStats,
        n_words: int,
        batch_size: int = 1,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(slots, probabilities) over live clusters followed by the new-cluster probability
        (``n_words``: V of the prior ``s0 = V·b0``, every word ever seen)."""
        stats.reserve(0, 0, int(words.max()) + 1 if words.shape[0] else 0)
        sh = self.shapes(stats, n_words)
        lp, lp_new = self.scores(stats, sh, words, int(counts.sum()), n_words, batch_size)
        slots = stats.active_slots()
        logits = np.append(lp[slots], lp_new)
        p = np.exp(logits - logits.max())
        return slots, p / p.sum()

    def term_weights(self, stats: MultinomialStats, uid: int) -> tuple[np.ndarray, np.ndarray]:
        """The cluster's document frequencies (the length bins' reserved entries left out)."""
        ws, cs = super().term_weights(stats, uid)
        keep = ~np.isin(ws, self._bin_ids())
        return ws[keep], cs[keep]

    def refound_test(self, stats: MultinomialStats, batch: DocBatch) -> FitTest:
        """:meth:`still_belongs` on the live statistics; shapes solved once per batch, at the
        first question."""
        size, n_words = len(batch), batch.n_words
        cache: list[Shapes] = []

        def fits(uid: int, words: np.ndarray, counts: np.ndarray) -> bool:
            if not cache:
                stats.reserve(0, 0, batch.vocab_size)
                cache.append(self.shapes(stats, n_words))
            return self.still_belongs_edcm(words, counts, uid, stats, cache[0], n_words, size)

        return fits

    def still_belongs_edcm(
        self,
        words: np.ndarray,
        counts: np.ndarray,
        uid: int,
        stats: MultinomialStats,
        sh: Shapes,
        n_words: int,
        batch_size: int = 1,
    ) -> bool:
        """Would member (``words``, ``counts``) of cluster ``uid`` be seated there again, taken
        out of it (one MAP collapsed Gibbs step under the EDCM)? Read-only."""
        k = stats.slot_of(uid)
        if k < 0:
            return False
        cfg = self.config
        g = stats.scale
        m_rest = stats.m[k] * g - 1.0
        if m_rest <= 0.0:
            return True  # its only member
        n, u = int(counts.sum()), words.shape[0]
        b = ekern.length_bin(n)
        # the state without the member: cluster k's histogram, m, T and document frequencies
        # less one, and the corpus prior re-centred without it; every shape re-solved
        corpus_hist = sh.corpus_hist.copy()
        corpus_hist[b] -= 1.0
        prior = self.prior_of_corpus(corpus_hist, sh.corpus_t - u, n_words)
        hist, m, ntok = sh.hist.copy(), stats.m.copy(), stats.ntok.copy()
        hist[k, b] -= 1.0 / g
        m[k] -= 1.0 / g
        ntok[k] = max(ntok[k] - (u + 1) / g, 0.0)
        if prior == sh.prior:  # the symmetric prior: only cluster k changes
            shape = sh.shape.copy()
            shape[k, ekern.S] = 0.0
            ekern.reshape(
                k, hist, _BIN_LENGTHS, m, ntok, g, prior.docs, prior.total, cfg.discount, shape
            )
        else:
            shape = np.zeros_like(sh.shape)
            ekern.solve_shapes(
                hist, _BIN_LENGTHS, m, ntok, stats.alive, stats.kmax, g, prior.docs,
                prior.total, cfg.discount, shape,
            )  # fmt: skip
        w64 = words.astype(np.int64)
        df = self.document_frequencies(stats, w64) - 1.0
        cb = prior.docs * prior.of(np.maximum(df, 0.0))
        rest = Shapes(hist, shape, prior, corpus_hist, sh.corpus_t - u)
        lp, lp_new = self.scores(stats, rest, w64, n, n_words, batch_size, cb)
        cw, cc = stats.word_counts(k)
        have = dict(zip(cw.tolist(), cc.tolist(), strict=True))
        loo = (
            shape[k, ekern.LOG_MASS]
            - kern.log_rising(shape[k, ekern.S], n)
            - u * shape[k, ekern.LOG_DC]
        )
        for j, w in enumerate(words.tolist()):
            x = have.get(w, 0.0) - 1.0
            if x > 0.0:
                loo += math.log1p(x / cb[j])
        return kern.keeps_its_seat(lp, lp.shape[0], k, loo, lp_new, stats.uid)


def warm_up_edcm() -> None:
    """Compile (first run) or load the EDCM kernels on a throwaway state."""
    model = EDCMMixture(EDCMConfig(rejuvenation_sweeps=1))
    model.bind_length_words(list(range(24, 24 + ekern.N_BINS)))
    stats = model.new_state()
    docs = [[0, 1, 2], [2, 3, 3, *range(4, 24)]]
    model.partial_fit(DocBatch.from_docs(docs, 24 + ekern.N_BINS), stats, np.random.default_rng(0))
