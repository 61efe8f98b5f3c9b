"""A von Mises–Fisher prior on a cluster's mean direction, centred on the stream's mean direction,
with its concentration fitted to the stream (empirical Bayes): the base measure of the vector
likelihoods (the ``vmf`` model and the hybrid's vector view).

Mean-pooled text vectors share a component (function words, register, the genre) whose weight
grows with a document's length, and sentence encoders put every text in a narrow cone: long
articles sit at cosine ~0.5 from the stream's mean, and so do the clusters' mean directions.
Under the uniform prior on the sphere, a new cluster's predictive is the uniform density, and
every such document looks like a member of any large cluster. Under the prior vMF(μ₀, κ₀), with
μ₀ the stream's mean direction, the collapsed predictive of a cluster is the uniform one's with
the pseudo-resultant a·μ₀, a = κ₀/κ, added to its resultant (an empty cluster's resultant is
a·μ₀):

    p(x | k) = C_p(κ) C_p(κ‖r_k + aμ₀‖) / C_p(κ‖r_k + aμ₀ + x‖)

κ₀ comes from the clusters' statistics by paper 003's eq. 10, as κ does: a cluster's mean
direction sits at cosine A₀ = ‖c̄‖/ρ from μ₀ (c̄ the mean of all vectors, ρ the typical
member-to-mean cosine, so that ‖c̄‖ = ρ·A₀), and a = κ(A₀)/κ(ρ), both at the data's own
cosines, so that the model's tempering of κ applies to both alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from noveld.models.concentration import HIGH, LOW, PRIOR_PAIRS, pair_statistics
from noveld.models.kernels import vmf as vkern


def typical_cosine(resultants: np.ndarray, mass: np.ndarray, prior: float, shared: float) -> float:
    """ρ: the square root of the mean cosine between two members of one cluster (live rows of
    ``resultants`` by their ``mass``), shrunk by :data:`~noveld.models.concentration.PRIOR_PAIRS`
    pairs towards ``prior`` read as a cosine above the stream's ``shared`` one (a pair at
    s² + (1 − s²)·prior², as :func:`~noveld.models.concentration.learned_cosine` takes the
    background out), in [LOW, HIGH]."""
    within, pairs, _, _ = pair_statistics(resultants, mass)
    b = shared * shared
    c2 = (within + PRIOR_PAIRS * (b + (1.0 - b) * prior * prior)) / (pairs + PRIOR_PAIRS)
    return math.sqrt(min(max(c2, LOW * LOW), HIGH * HIGH))


@dataclass(frozen=True)
class DirectionPrior:
    """The pseudo-resultant a·μ₀ every cluster's vector resultant carries (None: the uniform
    prior, a = 0)."""

    pseudo: np.ndarray | None

    @classmethod
    def fitted(
        cls,
        resultants: np.ndarray,
        mass: np.ndarray,
        emb: np.ndarray | None,
        prior_cosine: float,
    ) -> DirectionPrior:
        """The prior of the live clusters (``resultants`` rows of positive ``mass``) and the
        batch's unit vectors ``emb`` (zero rows: none): μ₀ from the mean of all their vectors,
        ‖c̄‖ from the mean cosine of two of them, ρ from :func:`typical_cosine` (from
        ``prior_cosine`` before any cluster has two members). A pure function of the
        statistics and the batch, so every replica takes the same; None without two vectors."""
        live = mass > 0.0
        total, count = resultants[live].sum(axis=0), float(mass[live].sum())
        if emb is not None:
            total = total + emb.sum(axis=0)
            count += float(np.count_nonzero(np.linalg.norm(emb, axis=1) > 0.0))
        norm = float(np.linalg.norm(total))
        if count <= 1.0 or norm <= 0.0:
            return cls(None)
        # ‖c̄‖ as the root of the mean cosine of two different vectors: ‖Σx‖² = N + Σ_{i≠j}
        # x_i·x_j, so ‖Σx‖/N itself is biased up by the N self-pairs (two orthogonal vectors
        # would give 0.71)
        shared = math.sqrt(max(norm * norm - count, 0.0) / (count * (count - 1.0)))
        return cls.around(total / norm, shared, resultants, mass, prior_cosine)

    @classmethod
    def of_clusters(
        cls,
        resultants: np.ndarray,
        mass: np.ndarray,
        emb: np.ndarray | None,
        prior_cosine: float,
        documents_first: bool = False,
    ) -> DirectionPrior:
        """The prior fitted to the live clusters' mean members ``r_k / m_k``, each cluster
        once: the base measure draws one mean direction per cluster, so a story that holds most
        of the documents is one draw, not a direction every document shares. μ₀ from
        Σ r_k/m_k, ρ·A₀ as the root of the mean cosine of two members of different clusters,
        ρ from :func:`typical_cosine`. One live cluster: :meth:`fitted` on the documents. No
        live cluster: the uniform prior (nothing tells one story from a direction every story
        shares), or with ``documents_first`` :meth:`fitted` on the batch's documents (for a
        model whose words keep one story's documents together whatever the vectors say)."""
        live = mass > 0.0
        if not live.any():
            return cls.fitted(resultants, mass, emb, prior_cosine) if documents_first else cls(None)
        if int(live.sum()) < 2:
            return cls.fitted(resultants, mass, emb, prior_cosine)
        means = resultants[live] / mass[live, None]
        k = float(means.shape[0])
        total = means.sum(axis=0)
        norm = float(np.linalg.norm(total))
        between = (norm * norm - float(np.einsum("kj,kj->", means, means))) / (k * (k - 1.0))
        if norm <= 0.0 or between <= 0.0:
            return cls(None)
        return cls.around(total / norm, math.sqrt(between), resultants, mass, prior_cosine)

    @classmethod
    def around(
        cls,
        mu0: np.ndarray,
        shared: float,
        resultants: np.ndarray,
        mass: np.ndarray,
        prior_cosine: float,
    ) -> DirectionPrior:
        """The prior around unit direction ``mu0`` when two members of different clusters sit
        at cosine ``shared``² (= (ρA₀)²): A₀ = shared/ρ, a = κ(A₀)/κ(ρ) by eq. 10, ρ from
        :func:`typical_cosine` of the clusters (``resultants``, ``mass``)."""
        p = resultants.shape[1]
        rho = typical_cosine(resultants, mass, prior_cosine, shared)
        a0 = min(max(shared / rho, LOW), HIGH)
        return cls(mu0 * (vkern.kappa_from_cosine(a0, p) / vkern.kappa_from_cosine(rho, p)))

    @property
    def strength(self) -> float:
        """a = κ₀/κ: how many documents' worth of resultant the prior is."""
        return 0.0 if self.pseudo is None else float(np.linalg.norm(self.pseudo))

    def resultants(self, r: np.ndarray, mass: np.ndarray) -> np.ndarray:
        """Each live cluster's resultant (rows of positive ``mass``) plus a·μ₀."""
        if self.pseudo is None:
            return r
        return r + np.outer(mass > 0.0, self.pseudo)

    def new_slot(self, emb: np.ndarray) -> tuple[float, np.ndarray]:
        """(a², a·μ₀·x for each row x of ``emb``): what a new slot opens with in the seating
        kernel (zeros without a prior)."""
        if self.pseudo is None:
            return 0.0, np.zeros(emb.shape[0])
        return self.strength**2, emb @ self.pseudo
