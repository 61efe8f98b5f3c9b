"""``DPMM.still_belongs`` (the novelty tracker's re-founding test) against the brute-force
re-seat: take the document out of its cluster's counts, then ask ``predict`` for its MAP seat."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig
from noveld.models.suffstats import MultinomialStats

VOCAB = 12


def stats_from(clusters: list[list[list[int]]]) -> MultinomialStats:
    """Statistics holding the given clusters of documents (lists of word ids)."""
    words = []
    for docs in clusters:
        flat = np.concatenate([np.asarray(d, dtype=np.int64) for d in docs])
        w, c = np.unique(flat, return_counts=True)
        words.append((w, c.astype(np.float64)))
    return MultinomialStats.from_clusters(
        uids=list(range(len(clusters))),
        m_raw=[float(len(docs)) for docs in clusters],
        n_raw=[float(sum(len(d) for d in docs)) for docs in clusters],
        words=words,
        scale=1.0,
        next_uid=len(clusters),
        docs_seen=sum(len(docs) for docs in clusters),
        vocab_size=VOCAB,
    )


doc = st.lists(st.integers(0, VOCAB - 1), min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(
    clusters=st.lists(st.lists(doc, min_size=1, max_size=4), min_size=1, max_size=4),
    which=st.integers(0, 100),
    discount=st.sampled_from([0.0, 0.5]),
    s=st.sampled_from([0.0, 2.0, 15.0]),
)
@example(
    clusters=[[[0], [0, 0], [1], [0, 0, 0]]], which=2, discount=0.0, s=0.0
)  # 3·β/(6+Vβ) = α·β/Vβ
def test_matches_taking_the_document_out_and_reseating_it(
    clusters: list[list[list[int]]], which: int, discount: float, s: float
) -> None:
    """Also under the length tempering (s > 0), which both sides must apply alike."""
    model = DPMM(
        DPMMConfig(
            alpha=0.5, beta=0.1, discount=discount, alpha_scaling="none", document_concentration=s
        )
    )
    k = which % len(clusters)
    d = which % len(clusters[k])
    w, c = np.unique(np.asarray(clusters[k][d], dtype=np.int64), return_counts=True)
    got = model.still_belongs(w, c.astype(np.int64), k, stats_from(clusters), VOCAB)
    if len(clusters[k]) == 1:
        assert got  # its only member
        return
    rest = [list(docs) for docs in clusters]
    del rest[k][d]
    seat = model.predict(DocBatch.from_docs([clusters[k][d]], VOCAB), stats_from(rest))
    assert got == (int(seat[0]) == k)


def test_a_stray_founder_no_longer_fits_its_taken_over_cluster() -> None:
    story = [[5, 6, 7], [5, 6, 8], [5, 7, 8], [6, 7, 8]]
    stray = [0, 1, 5]
    other = [[0, 1, 2], [0, 1, 3], [0, 2, 3]]
    stats = stats_from([other, [stray, *story]])
    model = DPMM(DPMMConfig(alpha=0.1, beta=0.05, discount=0.0, alpha_scaling="none"))
    one = np.ones(3, dtype=np.int64)
    assert not model.still_belongs(np.array(stray), one, 1, stats, VOCAB)
    assert model.still_belongs(np.array(story[0]), one, 1, stats, VOCAB)
    assert not model.still_belongs(np.array(story[0]), one, 99, stats, VOCAB)  # unknown uid
