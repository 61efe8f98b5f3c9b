"""numba kernels for CRP seating under the collapsed Dirichlet–multinomial likelihood.

One module per responsibility: :mod:`.pool` (the postings pool of raw cluster–word counts and
the cluster slots), :mod:`.predictive` (seating weights and the choice of a slot),
:mod:`.seating` (seating a batch and Gibbs sweeps), :mod:`.merges` and :mod:`.splits` (the
moves). Callers use ``from noveld.models.kernels import multinomial as kern``; every name is
re-exported here.
"""

from __future__ import annotations

from noveld.models.kernels.multinomial.merges import merge_gains, move_cluster
from noveld.models.kernels.multinomial.pool import (
    DOCS_SEEN,
    ICTL_SIZE,
    KMAX,
    NEXT_UID,
    NFREE,
    POOL_USED,
    STEPS,
    _close_if_empty,
    add_document,
    add_word_counts,
    alloc_entry,
    cluster_word_counts,
    compact_postings,
    find_or_alloc,
    open_cluster,
    postings_entries,
    words_in_use,
    words_of_clusters,
)
from noveld.models.kernels.multinomial.predictive import (
    LINEAR_MAX_LEN,
    MARGIN_CAP,
    TIE_TOL,
    choose,
    choose_linear,
    keeps_its_seat,
    log_rising,
    score_document,
    score_document_linear,
    word_baseline,
)
from noveld.models.kernels.multinomial.seating import reseat_documents, seat_batch
from noveld.models.kernels.multinomial.splits import (
    best_split_group,
    best_split_groups,
    reseat_into_fresh,
    split_gain,
)

__all__ = [
    "DOCS_SEEN",
    "ICTL_SIZE",
    "KMAX",
    "LINEAR_MAX_LEN",
    "MARGIN_CAP",
    "NEXT_UID",
    "NFREE",
    "POOL_USED",
    "STEPS",
    "TIE_TOL",
    "_close_if_empty",
    "add_document",
    "add_word_counts",
    "alloc_entry",
    "best_split_group",
    "best_split_groups",
    "choose",
    "choose_linear",
    "cluster_word_counts",
    "compact_postings",
    "find_or_alloc",
    "keeps_its_seat",
    "log_rising",
    "merge_gains",
    "move_cluster",
    "open_cluster",
    "postings_entries",
    "reseat_documents",
    "reseat_into_fresh",
    "score_document",
    "score_document_linear",
    "seat_batch",
    "split_gain",
    "word_baseline",
    "words_in_use",
    "words_of_clusters",
]
