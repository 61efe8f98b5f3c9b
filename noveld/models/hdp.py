"""The two-level category/topic HDP with known labels (LBPL-NTM, paper 000 §3; DESIGN §5.3):
state and the per-batch step. Pure: arrays in, arrays out.

Experimental and not wired into the daemon yet (issue #4): it still needs its statistics in the
state store, and it is far from the targets — a first measurement on news.jsonl (dense counts,
topics learned from scratch in the stream) gave NMI 0.11 with the defaults and 0.58 at best
(300 topics, ζ = 0.001, γ = 20, MAP) at ~500 docs/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from noveld.models.kernels import hdp as kern


@dataclass(frozen=True)
class HDPConfig:
    """Hyperparameters: L topics, Dirichlet priors β (topic–word) and ζ (category–topic), the
    table and category concentrations α and γ, Gibbs sweeps per batch."""

    topics: int = 50
    beta: float = 0.01
    zeta: float = 0.1
    alpha: float = 1.0
    gamma: float = 1.0
    sweeps: int = 2
    deterministic: bool = False


@dataclass
class HDPState:
    """Global counts: topic–word ``nlw``/``nl``, category–topic ``okl``/``ok``, tables ``mk``."""

    topics: int
    nlw: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    nl: np.ndarray = field(default_factory=lambda: np.zeros(0))
    okl: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    ok: np.ndarray = field(default_factory=lambda: np.zeros(0))
    mk: np.ndarray = field(default_factory=lambda: np.zeros(0))
    alive: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))
    uid: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ctl: np.ndarray = field(default_factory=lambda: np.zeros(2, dtype=np.int64))

    def __post_init__(self) -> None:
        if self.nl.shape[0] == 0:
            self.nlw = np.zeros((self.topics, 0))
            self.nl = np.zeros(self.topics)
            self.okl = np.zeros((0, self.topics))

    def reserve(self, categories: int, vocab_size: int) -> None:
        """Room for ``categories`` more categories and a vocabulary of ``vocab_size``."""
        if vocab_size > self.nlw.shape[1]:
            grown = np.zeros((self.topics, max(vocab_size, 2 * self.nlw.shape[1])))
            grown[:, : self.nlw.shape[1]] = self.nlw
            self.nlw = grown
        need = int(self.ctl[0]) + categories
        if need > self.okl.shape[0]:
            n = max(need, 2 * self.okl.shape[0], 64)
            okl = np.zeros((n, self.topics))
            okl[: self.okl.shape[0]] = self.okl
            self.okl = okl
            self.ok = np.concatenate([self.ok, np.zeros(n - self.ok.shape[0])])
            self.mk = np.concatenate([self.mk, np.zeros(n - self.mk.shape[0])])
            self.alive = np.concatenate([self.alive, np.zeros(n - self.alive.shape[0], np.bool_)])
            self.uid = np.concatenate([self.uid, np.full(n - self.uid.shape[0], -1, np.int64)])


class HDP:
    """One mini-batch at a time: CRF seating plus Gibbs sweeps over the batch (paper 000 eqs.
    3–7); a document's category is the one generating most of its words."""

    kind = "hdp"

    def __init__(self, config: HDPConfig) -> None:
        self.config = config

    def new_state(self) -> HDPState:
        return HDPState(self.config.topics)

    def partial_fit(
        self,
        docs: list[np.ndarray],
        vocab_size: int,
        state: HDPState,
        rng: np.random.Generator,
        known: np.ndarray | None = None,
    ) -> np.ndarray:
        """Categories (slots) of the batch's documents; ``docs`` are token-id arrays (repeats
        kept), ``known[d]`` a category slot to fix document d to (−1: none)."""
        cfg = self.config
        lengths = np.array([len(d) for d in docs], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        tokens = np.concatenate(docs).astype(np.int64) if docs else np.zeros(0, np.int64)
        n_tok = tokens.shape[0]
        state.reserve(2 * n_tok * (1 + cfg.sweeps) + 1, vocab_size)
        if known is None:
            known = np.full(len(docs), -1, dtype=np.int64)
        tok_y = np.zeros(n_tok, dtype=np.int64)
        tok_t = np.zeros(n_tok, dtype=np.int64)
        tab_doc = np.zeros(n_tok * (1 + cfg.sweeps) + 1, dtype=np.int64)
        tab_k = np.zeros_like(tab_doc)
        tab_size = np.zeros_like(tab_doc)
        uniforms = rng.random(4 * n_tok * (1 + cfg.sweeps) + 1)
        kern.hdp_batch(
            ptr, tokens, known.astype(np.int64), cfg.sweeps, uniforms,
            cfg.deterministic, cfg.beta, vocab_size * cfg.beta, cfg.zeta, cfg.alpha, cfg.gamma,
            state.nlw, state.nl, state.okl, state.ok, state.mk, state.alive, state.uid,
            state.ctl, tok_y, tok_t, tab_doc, tab_k, tab_size,
        )  # fmt: skip
        out = np.empty(len(docs), dtype=np.int64)
        for d in range(len(docs)):
            cats = tab_k[tok_t[ptr[d] : ptr[d + 1]]]
            out[d] = np.bincount(cats).argmax() if cats.shape[0] else -1
        return out
