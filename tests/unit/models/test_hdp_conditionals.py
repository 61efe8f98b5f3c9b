"""Conditionals of the category/topic HDP (paper 000 eqs. 3–6), as the sampler uses them,
against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import gammaln

from noveld.models.kernels import hdp
from noveld.models.kernels.hdp_sampler import new_table_weight


def counts(seed: int, k: int = 5, n_topics: int = 6) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    okl = rng.integers(0, 6, size=(k, n_topics)).astype(float)
    ok = okl.sum(axis=1)
    mk = rng.integers(0, 4, size=k).astype(float)
    alive = rng.random(k) < 0.8
    return okl, ok, mk, alive


@given(st.integers(0, 10_000))
@settings(deadline=None)
def test_topic_predictive_is_eq4_and_eq5(seed: int) -> None:
    okl, ok, _, _ = counts(seed)
    zeta, n_topics = 0.3, okl.shape[1]
    for k in range(okl.shape[0]):
        probs = [hdp.f_topic(k, y, okl, ok, zeta, n_topics) for y in range(n_topics)]
        assert probs == pytest.approx((zeta + okl[k]) / (n_topics * zeta + ok[k]))
        assert sum(probs) == pytest.approx(1.0)
    assert hdp.f_topic(-1, 2, okl, ok, zeta, n_topics) == pytest.approx(1 / n_topics)


def crp_weights(
    mk: np.ndarray, alive: np.ndarray, gamma: float, d: float
) -> tuple[np.ndarray, float]:
    """Pitman–Yor CRP weights, dense: ``m_k − d`` (floored at 1e-3) of the live categories
    and ``γ + d·K`` of a new one; ``m_k`` and ``γ`` for d = 0 (eq. 2)."""
    live = alive & (mk > 0)
    return np.maximum(mk[live] - d, 1e-3), gamma + d * int(live.sum())


discounts = st.sampled_from([0.0, 0.25, 0.5, 0.9])


@given(st.integers(0, 10_000), discounts)
@settings(deadline=None)
def test_new_table_predictive_integrates_out_its_category(seed: int, d: float) -> None:
    okl, ok, mk, alive = counts(seed)
    zeta, gamma, n_topics = 0.3, 1.7, okl.shape[1]
    cat = (okl, ok, mk, alive, np.arange(okl.shape[0]))
    out = np.array(
        [new_table_weight(y, zeta, gamma, cat, okl.shape[0], d) for y in range(n_topics)]
    )
    live = alive & (mk > 0)
    w, new = crp_weights(mk, alive, gamma, d)
    theta = (zeta + okl) / (n_topics * zeta + ok[:, None])
    expected = (w @ theta[live] + new / n_topics) / (w.sum() + new)
    np.testing.assert_allclose(out, expected, rtol=1e-12)
    assert out.sum() == pytest.approx(1.0)


@given(
    st.integers(0, 10_000),
    st.lists(st.integers(0, 5), min_size=1, max_size=8),
    discounts,
    st.sampled_from([0.0, 2.0, 15.0]),
)
@settings(deadline=None)
def test_table_category_weights_are_the_dirichlet_multinomial_marginal(
    seed: int, ys: list[int], d: float, conc: float
) -> None:
    """Eq. 6's sequential product equals Γ(Lζ+O_k)/Γ(Lζ+O_k+n) Π_y Γ(ζ+O_ky+c_y)/Γ(ζ+O_ky),
    to the power τ = (1 + s)/(n + s) of the length tempering (s = 0: 1), times the
    (Pitman–Yor) CRP weight of the category."""
    okl, ok, mk, alive = counts(seed)
    zeta, gamma, n_topics = 0.3, 1.7, okl.shape[1]
    y = np.array(ys, dtype=np.int64)
    c = np.bincount(y, minlength=n_topics)
    out = np.empty(okl.shape[0])
    tau = min(1.0, (1 + conc) / (len(ys) + conc)) if conc > 0 else 1.0
    new = hdp.table_category_logweights(
        y, okl, ok, mk, alive, okl.shape[0], zeta, gamma, out, d, tau
    )
    _, new_weight = crp_weights(mk, alive, gamma, d)
    for k in range(okl.shape[0]):
        if not alive[k] or mk[k] <= 0:
            assert out[k] == -np.inf
            continue
        expected = math.log(max(mk[k] - d, 1e-3)) + tau * (
            gammaln(n_topics * zeta + ok[k])
            - gammaln(n_topics * zeta + ok[k] + len(ys))
            + float(np.sum(gammaln(zeta + okl[k] + c) - gammaln(zeta + okl[k])))
        )
        assert out[k] == pytest.approx(expected, rel=1e-10)
    expected_new = math.log(new_weight) + tau * (
        gammaln(n_topics * zeta)
        - gammaln(n_topics * zeta + len(ys))
        + float(np.sum(gammaln(zeta + c) - gammaln(zeta)))
    )
    assert new == pytest.approx(expected_new, rel=1e-10)
