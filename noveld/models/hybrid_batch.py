"""The hybrid model's per-batch pieces: the seating's dense inputs, the vectors' part of the
batch's delta, the births in the order their first documents came, and the members' features
the novelty tracker keeps."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from noveld.models.base import DocBatch, StatsDelta
from noveld.models.kernels import dimension_index as dkern
from noveld.models.kernels import multinomial as kern
from noveld.models.kernels import vmf as vkern
from noveld.models.kernels import vmf_table as vtable
from noveld.models.suffstats import MultinomialStats
from noveld.models.vmf import FEATURE_SCALE


@dataclass
class SeatingState:
    """The batch's working copy of the clusters the kernel reads and updates: existing slots
    first (true units), then room for one new cluster per document."""

    mass: np.ndarray
    ntok: np.ndarray
    rn2: np.ndarray
    live: np.ndarray
    tie_uid: np.ndarray
    dots: np.ndarray  # (slots × documents): r_k · x_d
    gram: np.ndarray


def seating_state(
    stats: MultinomialStats, resultants: np.ndarray, emb: np.ndarray, f: float
) -> SeatingState:
    """The working copy for a batch with unit vectors ``emb`` (zero rows: none), the clusters'
    ``resultants`` already decayed by ``f``, the batch's pending decay."""
    kmax = stats.kmax
    nb = emb.shape[0]
    g = stats.scale * f
    alive = stats.alive[:kmax]
    mass = np.zeros(kmax + nb)
    mass[:kmax] = np.where(alive, stats.m[:kmax] * g, 0.0)
    ntok = np.zeros(kmax + nb)
    ntok[:kmax] = np.where(alive, stats.ntok[:kmax] * g, 0.0)
    rn2 = np.zeros(kmax + nb)
    rn2[:kmax] = np.einsum("kj,kj->k", resultants, resultants)
    live = np.zeros(kmax + nb, dtype=np.bool_)
    live[:kmax] = alive
    tie_uid = np.zeros(kmax + nb, dtype=np.int64)
    tie_uid[:kmax] = stats.uid[:kmax]
    dots = np.zeros((kmax + nb, nb))
    np.matmul(resultants, emb.T, out=dots[:kmax])
    return SeatingState(mass, ntok, rn2, live, tie_uid, dots, emb @ emb.T)


@dataclass(frozen=True)
class Centring:
    """The vector view scored around the stream's mean vector c̄ (None: not centred).

    Mean-pooled text vectors share a component (function words, register) that grows with a
    document's length: long articles sit at cosine ~0.5 from the stream's mean, headlines at
    ~0.15. Left in, it makes every long document look like a member of any large cluster, and
    the first cluster takes the stream. Taken out — each vector less c̄, back to unit length;
    each cluster's resultant less its mass × c̄ — the vMF compares what is left."""

    mean: np.ndarray | None

    @classmethod
    def of(cls, r: np.ndarray, mass: np.ndarray, emb: np.ndarray | None = None) -> Centring:
        """c̄ from the live clusters' resultants ``r`` and masses (zero for a dead slot) and the
        batch's unit vectors ``emb`` (zero rows: none): a pure function of the statistics and
        the batch, so every replica takes the same."""
        total, count = r[mass > 0.0].sum(axis=0), float(mass.sum())
        if emb is not None:
            total = total + emb.sum(axis=0)
            count += float(np.count_nonzero(np.linalg.norm(emb, axis=1) > 0.0))
        return cls(total / count if count > 0.0 else None)

    def resultants(self, r: np.ndarray, mass: np.ndarray) -> np.ndarray:
        """Each cluster's resultant less its mass × c̄."""
        return r if self.mean is None else r - np.outer(mass, self.mean)

    def vectors(self, emb: np.ndarray) -> np.ndarray:
        """Each unit vector less c̄, back to unit length; a zero row (no vector) stays zero."""
        if self.mean is None:
            return emb
        has = np.linalg.norm(emb, axis=1) > 0.0
        out = np.where(has[:, None], emb - self.mean, 0.0)
        length = np.linalg.norm(out, axis=1)
        ok = length > 1e-9
        out[ok] /= length[ok, None]
        out[~ok] = 0.0
        return out


def vector_delta(
    batch: DocBatch, uids: np.ndarray, ids: np.ndarray, f: float, born: list[tuple[int, int, float]]
) -> StatsDelta:
    """The batch's additions as :meth:`VMFMixture._embedding_delta` builds them, value for
    value (the same products sum the vectors' parts per cluster), with their (cluster,
    reserved id) entries, unique by construction, only ordered among the words' rather than
    looked up, sorted and summed with them. ``ids``: the reserved ids, positive parts, then
    negative."""
    assert batch.emb is not None
    cl, inv = np.unique(uids, return_inverse=True)
    v1 = batch.vocab_size + 1
    wkey = np.repeat(inv, np.diff(batch.ptr)) * v1 + batch.words
    ukey, kinv = np.unique(wkey, return_inverse=True)
    wc = np.bincount(kinv, weights=batch.counts.astype(np.float64), minlength=ukey.shape[0])
    onehot = np.zeros((cl.shape[0], len(batch)))
    onehot[inv, np.arange(len(batch))] = 1.0
    pos_part, neg_part = onehot @ np.maximum(batch.emb, 0.0), onehot @ np.maximum(-batch.emb, 0.0)
    e_cluster, e_word, e_count = dkern.merge_entries(
        ukey, wc, v1, pos_part, neg_part, np.argsort(ids), ids
    )
    return StatsDelta(
        decay=f,
        cluster_uids=cl.astype(np.int64),
        dm=np.bincount(inv, minlength=cl.shape[0]).astype(np.float64),
        dntok=np.bincount(inv, weights=batch.lengths.astype(np.float64), minlength=cl.shape[0]),
        word_cluster=e_cluster,
        word_ids=e_word,
        word_count=e_count,
        born_uids=np.array([b[0] for b in born], dtype=np.int64),
        retired_uids=np.zeros(0, dtype=np.int64),
    )


def births_in_order(
    assign: np.ndarray, n_old: int, margin: np.ndarray, stats: MultinomialStats
) -> tuple[np.ndarray, list[tuple[int, int, float]]]:
    """Cluster uid per document and the births: new slots (``≥ n_old``) become uids in order
    of their first document, each born with that document's novelty margin."""
    next_uid = int(stats.ictl[kern.NEXT_UID])
    uid_of: dict[int, int] = {}
    born: list[tuple[int, int, float]] = []
    for d, k in enumerate(assign.tolist()):
        if k >= n_old and k not in uid_of:
            uid_of[k] = next_uid + len(uid_of)
            born.append((uid_of[k], d, float(min(margin[d], kern.MARGIN_CAP))))
    uids = np.array(
        [uid_of[k] if k >= n_old else int(stats.uid[k]) for k in assign.tolist()],
        dtype=np.int64,
    )
    return uids, born


class MemberFeatures(Sequence[tuple[np.ndarray, np.ndarray]]):
    """Each document's words and counts, then its vector on the dimensions' reserved entries
    (x_j · 2^20, rounded), computed per document on access."""

    def __init__(self, batch: DocBatch, pos: np.ndarray, neg: np.ndarray) -> None:
        self._batch, self._pos, self._neg = batch, pos, neg

    def __len__(self) -> int:
        return len(self._batch)

    def __getitem__(self, d: int) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[override]
        batch = self._batch
        w, c = batch.doc(d)
        x = np.zeros(0) if batch.emb is None else batch.emb[d]
        on = np.flatnonzero(x)
        ids = np.where(x[on] > 0.0, self._pos[on], self._neg[on])
        values = np.rint(np.abs(x[on]) * FEATURE_SCALE).astype(np.int64)
        return np.concatenate([w, ids]), np.concatenate([c.astype(np.int64), values])


def vector_merge_gains(
    r: np.ndarray, young: np.ndarray, p: int, kappa: float, pseudo: np.ndarray | None = None
) -> np.ndarray:
    """``out[i, k]``: the log ratio of the vectors' collapsed marginal (concentration κ, rows of
    the kmax × p resultants ``r``, each live one with the prior's pseudo-resultant a·μ₀ in it)
    with clusters ``young[i]`` and k together over apart. A cluster of resultant r has marginal
    ``C_p(κ)^n · C_p(κa) / C_p(κ‖r + aμ₀‖)``, so the ratio is
    ``log C_p(κ‖r_a + aμ₀‖) + log C_p(κ‖r_b + aμ₀‖) − log C_p(κ‖r_a + r_b + aμ₀‖) − log C_p(κa)``
    (a = 0, ``pseudo`` None: the uniform prior, C_p(0))."""
    rn2 = np.einsum("kj,kj->k", r, r)
    logc = vtable.log_normalizers(p, kappa * np.sqrt(rn2))
    both = rn2[young, None] + rn2[None, :] + 2.0 * (r[young] @ r.T)
    log_empty = vkern.log_sphere_density_at_zero(p)
    if pseudo is not None:  # one pseudo-resultant in the union, not two
        along = r @ pseudo
        a2 = float(pseudo @ pseudo)
        both += a2 - 2.0 * along[young, None] - 2.0 * along[None, :]
        log_empty = vkern.log_vmf_normalizer(p, kappa * math.sqrt(a2))
    logc_both = vtable.log_normalizers(p, kappa * np.sqrt(np.maximum(both, 0.0)).ravel())
    out: np.ndarray = logc[young, None] + logc[None, :] - logc_both.reshape(both.shape) - log_empty
    return out
