"""Delta/checkpoint codecs and delta replay: what a restarted process or another replica
rebuilds from the Redis log must equal what the writer holds."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.dpmm_oracle import fitted_state, random_docs
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.models.base import DocBatch
from noveld.models.dpmm import DPMM, DPMMConfig, replay_delta
from noveld.models.kernels import multinomial as kern
from noveld.models.suffstats import MultinomialStats
from noveld.state.base import NamespaceState, state_digest
from noveld.state.codec import (
    CodecError,
    decode_checkpoint,
    decode_delta,
    encode_checkpoint,
    encode_delta,
)


def digest(stats: MultinomialStats) -> str:
    return state_digest(NamespaceState({}, stats))


def copy_stats(stats: MultinomialStats) -> MultinomialStats:
    return MultinomialStats.from_arrays({k: v.copy() for k, v in stats.to_arrays().items()})


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 0.5]))
def test_replayed_deltas_rebuild_the_writer_state_exactly(seed: int, discount: float) -> None:
    """Without forgetting, counts are integers: checkpoint + replayed deltas is bit-exact."""
    model, stats, _, _ = fitted_state(seed, discount=discount)
    replica = copy_stats(stats)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        res = model.partial_fit(DocBatch.from_docs(random_docs(rng, 20, 30), 30), stats, rng)
        replay_delta(replica, decode_delta(encode_delta(res.delta)), 0.0)
    assert digest(replica) == digest(stats)
    assert int(replica.ictl[4]) == int(stats.ictl[4])  # documents seen
    # uids of clusters opened and emptied within a batch are used up but not in the delta; the
    # store carries the writer's next uid itself
    assert int(replica.ictl[3]) <= int(stats.ictl[3])


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000))
def test_replay_with_forgetting_and_pruning_matches_closely(seed: int) -> None:
    model = DPMM(
        DPMMConfig(
            alpha=0.5,
            beta=0.1,
            alpha_scaling="none",
            half_life_docs=40.0,
            retire_min_mass=0.3,
            prune_below=0.05,
        )
    )
    stats = model.new_state()
    replica = model.new_state()
    rng = np.random.default_rng(seed)
    for _ in range(12):
        res = model.partial_fit(DocBatch.from_docs(random_docs(rng, 15, 40), 40), stats, rng)
        model.apply_delta(replica, decode_delta(encode_delta(res.delta)))
    live = {int(stats.uid[k]): k for k in stats.active_slots()}
    rlive = {int(replica.uid[k]): k for k in replica.active_slots()}
    assert live.keys() == rlive.keys()
    for u, k in live.items():
        r = rlive[u]
        assert replica.mass(np.array([r]))[0] == pytest.approx(
            stats.mass(np.array([k]))[0], rel=1e-9
        )
        w1, c1 = stats.word_counts(k)
        w2, c2 = replica.word_counts(r)
        o1, o2 = np.argsort(w1), np.argsort(w2)
        np.testing.assert_array_equal(w1[o1], w2[o2])
        np.testing.assert_allclose(c1[o1], c2[o2], rtol=1e-9)


def test_delta_codec_round_trips_fractional_counts() -> None:
    model, stats, _, _ = fitted_state(3, half_life=30.0)
    rng = np.random.default_rng(1)
    d = model.partial_fit(DocBatch.from_docs(random_docs(rng, 10, 30), 30), stats, rng).delta
    scaled = type(d)(**{**d.__dict__, "word_count": d.word_count * 0.37})
    back = decode_delta(encode_delta(scaled))
    for name in (
        "cluster_uids",
        "dm",
        "dntok",
        "word_cluster",
        "word_ids",
        "word_count",
        "born_uids",
        "retired_uids",
    ):
        np.testing.assert_array_equal(getattr(back, name), getattr(scaled, name))
    assert back.decay == scaled.decay


def test_corrupt_blobs_are_refused_with_a_reason() -> None:
    model, stats, _, _ = fitted_state(4)
    rng = np.random.default_rng(2)
    blob = encode_delta(
        model.partial_fit(DocBatch.from_docs(random_docs(rng, 5, 30), 30), stats, rng).delta
    )
    with pytest.raises(CodecError, match="header says"):
        decode_delta(blob[:-3])
    with pytest.raises(CodecError, match="not a version"):
        decode_delta(b"XYZ" + blob[3:])
    with pytest.raises(CodecError, match="unreadable"):
        decode_checkpoint(b"garbage")


def test_checkpoint_round_trip_keeps_state_and_header() -> None:
    _, stats, _, _ = fitted_state(9, half_life=25.0)
    before = digest(stats)
    back, header = decode_checkpoint(encode_checkpoint(stats, {"seq": 17, "vocab": 30}))
    assert digest(back) == before
    assert header["seq"] == 17 and header["vocab"] == 30


def test_a_snapshot_that_counted_young_clusters_in_documents_loads_them_young_from_now() -> None:
    """Young clusters stored as a document count (``young_since``, before the horizon was
    counted in log steps) load as born at the current step; ``young_step`` loads as stored."""
    stats = MultinomialStats()
    stats.ictl[kern.STEPS] = 7
    stats.lineage.add_young(3, 5)
    arrays = stats.to_arrays()
    assert MultinomialStats.from_arrays(arrays).lineage.young == {3: 5}
    old = {k: v for k, v in arrays.items() if k != "young_step"}
    old["young_since"] = np.array([12_345], dtype=np.int64)  # a document count
    assert MultinomialStats.from_arrays(old).lineage.young == {3: 7}
