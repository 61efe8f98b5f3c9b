"""The ``hdp`` model: two-level category/topic HDP with known labels (LBPL-NTM, paper 000 §3).
One mini-batch at a time: densify, run the CRF sampler kernels, write back an additive delta."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace

import numpy as np

from noveld.models.base import BatchResult, DocBatch, FitTest, StatsDelta
from noveld.models.dpmm.config import decay_factor
from noveld.models.dpmm.replay import (
    UncountedWords,
    apply_additions,
    finish_delta,
    no_uncounted_words,
)
from noveld.models.hdp.absorb import absorb_into_known
from noveld.models.hdp.batch_state import BatchState, topic_offset
from noveld.models.hdp.concentrations import (
    CONCENTRATION_ITERS,
    resample_group_concentration,
    resample_top_concentration,
)
from noveld.models.hdp.config import HDPConfig
from noveld.models.hdp.delta import batch_births, batch_delta
from noveld.models.hdp.reconcile import reconcile_births
from noveld.models.hdp.topics import is_topic, topic_uid
from noveld.models.hdp.vectors import CategoryVectors, category_vectors
from noveld.models.kernels import hdp_moves as moves
from noveld.models.kernels import hdp_sampler as smp
from noveld.models.kernels import hdp_scores as scores
from noveld.models.kernels import multinomial as mkern
from noveld.models.suffstats import MultinomialStats


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
        self.vectors: CategoryVectors | None = None  # the vector view, once its ids are bound

    def new_state(self) -> MultinomialStats:
        """Empty statistics."""
        return MultinomialStats()

    def bind_topic_words(self, ids: list[int]) -> None:
        """Vocabulary ids of the reserved topic entries (``topic_token(l)`` for l < L)."""
        if len(ids) != self.config.topics:
            raise ValueError(f"need {self.config.topics} topic word ids, got {len(ids)}")
        self.topic_words = np.asarray(ids, dtype=np.int64)

    def bind_dimension_words(self, pos_ids: list[int], neg_ids: list[int], count_id: int) -> None:
        """Ids of the vector view's reserved entries (:mod:`noveld.models.hdp.vectors`)."""
        c = self.config
        self.vectors = category_vectors(c.dimension, c.cosine, c.view_weight, c.direction_prior,
                                        pos_ids, neg_ids, count_id)  # fmt: skip

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
        if self.topic_words is None or (self.vectors is None and self.config.dimension):
            raise RuntimeError("hdp: bind_topic_words (and dimension words) before partial_fit")
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
        offset = topic_offset(int(stats.ictl[mkern.NEXT_UID]), cfg.topics)
        while True:
            loc = BatchState.gather(self.topic_words, stats, f, bwords, word_tokens, known,
                                     cfg.topics, vocab_size * cfg.beta, room, nb, batch,
                                     offset, self.vectors)  # fmt: skip
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
        born = batch_births(born_local, assign_local, tab_doc, tab_k, open_tables, cat_uid)
        ctx_uids = cat_uid[tab_k[loc.cx[5]]]  # the category carrying each document's context
        topics = (tok_y + offset) % cfg.topics  # local topics → topic numbers
        delta = self._delta(batch, tokens, topics, cat_uid[tok_cat], tab_uids, f, born, nb,
                            ctx_uids)  # fmt: skip
        apply_additions(stats, delta)
        retired = self._retire(stats, pinned)
        gone = [u for u, _, _ in retired]
        born_here = {b[0] for b in born}
        joined = self._reconcile(stats, born_here, pinned, gamma, gone, batch)
        absorbed = joined + absorb_into_known(
            stats, assignments, pinned, gamma, {*gone, *(a for a, _ in joined)}, batch, cfg,
            self.topic_words, self.vectors,
        )  # fmt: skip
        if absorbed:
            into = dict(absorbed)
            for _ in range(2):  # a category joined to another writer's, then absorbed
                assignments = np.array([into.get(u, u) for u in assignments.tolist()], np.int64)
            born = [b for b in born if b[0] not in into]
        delta = replace(
            delta,
            retired_uids=np.array(gone + [a for a, _ in absorbed], np.int64),
            merges=np.array(absorbed, dtype=np.int64).reshape(-1, 2),
        )  # born_uids keep merged births, so a replica's uid counter passes them too
        finish_delta(stats, delta, cfg.half_life_docs, cfg.prune_below, self.uncounted_words)
        seated = ~np.isnan(log_pred)  # the unlabelled documents
        tokens_seated = float(batch.lengths[seated].sum())
        lpt = float(log_pred[seated].sum()) / tokens_seated if tokens_seated else float("nan")
        merged = [(a, b, a in born_here) for a, b in absorbed]
        return BatchResult(assignments, born, retired, delta, lpt, merged=merged)

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
        loc = BatchState.gather(self.topic_words, stats, 1.0, bwords, word_tokens, None,
                                 cfg.topics, n_words * cfg.beta, 1, 1, one)  # fmt: skip
        local = np.flatnonzero(loc.uid[: loc.n_existing] == uid)
        if local.shape[0] == 0:
            return False
        k = int(local[0])
        loc.tw[3][0] = loc.tw[2].sum()
        gamma = self.last_concentrations[1]
        chosen = smp.reseat_member(tok_local.astype(np.int64), k, cfg.zeta, cfg.beta,
                                   n_words * cfg.beta, gamma, loc.tw, loc.cat, loc.ix,
                                   loc.ctl, cfg.discount,
                                   cfg.document_concentration)  # fmt: skip
        return int(chosen) == k

    # ---- internals ------------------------------------------------------------------------
    def _reconcile(
        self,
        stats: MultinomialStats,
        born: set[int],
        pinned: Collection[int],
        gamma: float,
        gone: list[int],
        batch: DocBatch,
    ) -> list[tuple[int, int]]:
        """This writer's young categories merged with other writers' (:func:`reconcile_births`);
        nothing without ``merge`` or while the young categories are of one uid slot."""
        cfg = self.config
        if not cfg.merge or self.topic_words is None:
            return []
        return reconcile_births(
            stats, born, pinned, gamma, gone, batch.vocab_size, cfg.beta,
            batch.n_words * cfg.beta, cfg.discount, cfg.young_steps, self.topic_words,
            self.vectors,
        )  # fmt: skip

    def _group_moves(
        self,
        loc: BatchState,
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
        loc: BatchState,
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
                cfg.document_concentration,
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

    def _delta(self, batch: DocBatch, tokens: np.ndarray, tok_y: np.ndarray,
               tok_cat_uid: np.ndarray, tab_uids: np.ndarray, f: float,
               born: list[tuple[int, int, float]], n_docs: int,
               ctx_uids: np.ndarray) -> StatsDelta:  # fmt: skip
        """The batch's additive delta (:func:`batch_delta`), its vectors with it."""
        assert self.topic_words is not None
        vec = None if self.vectors is None else self.vectors.entries(batch.emb, ctx_uids)
        return batch_delta(batch, tokens, tok_y, tok_cat_uid, tab_uids, f, born, n_docs,
                           ctx_uids, self.topic_words, vec)  # fmt: skip

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
