"""``noveld_log_predictive_per_token`` against a direct computation of paper 004 eq. 4: the
mixture's predictive probability of a document under the model before it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.models.suffstats import MultinomialStats
from noveld.models.svi import SVI, SVIConfig

V = 12


def log_p_given_cluster(words: list[int], ws: np.ndarray, cs: np.ndarray, ntok: float,
                        beta: float) -> float:  # fmt: skip
    """log p(d | cluster) with the cluster's word counts (ws, cs) and token count ntok."""
    counts = np.bincount(np.asarray(words), minlength=V).astype(float)
    kw = np.zeros(V)
    kw[ws] = cs
    nd = counts.sum()
    return float(
        gammaln(ntok + V * beta) - gammaln(ntok + V * beta + nd)
        + (gammaln(kw + beta + counts) - gammaln(kw + beta)).sum()
    )  # fmt: skip


def direct(stats: MultinomialStats, words: list[int], cfg: DPMMConfig) -> float:
    """log p(d) = log Σ_k (m_k−δ)/(M+θ) p(d|k) + (θ+δK)/(M+θ) p(d|prior), θ = α (one document)."""
    slots = stats.active_slots().tolist()
    m = np.array([stats.m[k] * stats.scale for k in slots])
    terms = [
        math.log(mk - cfg.discount)
        + log_p_given_cluster(words, *stats.word_counts(k), float(stats.ntok[k] * stats.scale),
                              cfg.beta)
        for k, mk in zip(slots, m, strict=True)
    ]  # fmt: skip
    new = cfg.alpha + cfg.discount * len(slots)
    terms.append(math.log(new) + log_p_given_cluster(words, np.empty(0, int), np.empty(0), 0.0,
                                                      cfg.beta))  # fmt: skip
    return float(logsumexp(terms) - math.log(m.sum() + cfg.alpha))


def test_a_one_word_document_against_an_empty_model_has_probability_one_over_v() -> None:
    for model in (DPMM(DPMMConfig()), SVI(SVIConfig())):
        stats = model.new_state()
        res = model.partial_fit(DocBatch.from_docs([[3]], V), stats, np.random.default_rng(0))
        assert res.log_predictive_per_token == pytest.approx(-math.log(V), abs=1e-9)


@pytest.mark.parametrize("kind", ["dpmm", "svi"])
@pytest.mark.parametrize("doc", [[3], [3, 7], [1, 1, 2], [5, 9, 9, 9, 0], [11, 10]])
def test_the_metric_equals_the_mixture_predictive_of_the_model_before_the_document(
    kind: str, doc: list[int]
) -> None:
    """Both models seat by eq. 4 (svi on its expected counts λ): one document's metric is its
    log predictive under the statistics it met, per token — also after svi's global steps have
    shrunk the earlier mass by (1−ρ_t)."""
    model = (
        DPMM(DPMMConfig(deterministic=True))
        if kind == "dpmm"
        else SVI(SVIConfig(corpus_size=200.0, document_concentration=0.0))
    )
    stats = model.new_state()
    rng = np.random.default_rng(1)
    history = [[1, 2, 3], [1, 2], [3, 3, 4], [7, 8, 9], [7, 9], [10, 11, 0], [5, 6], [1, 2, 4]]
    for d in history * 3:
        model.partial_fit(DocBatch.from_docs([d], V), stats, rng)
    assert (stats.m[stats.alive] * stats.scale).min() > model.config.discount
    expected = direct(stats, doc, model.config)
    res = model.partial_fit(DocBatch.from_docs([doc], V), stats, rng)
    assert res.log_predictive_per_token == pytest.approx(expected / len(doc), rel=1e-9)
    assert res.log_predictive_per_token < 0.0
