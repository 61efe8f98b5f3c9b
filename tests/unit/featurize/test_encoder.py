"""The built-in text encoder: its pooling kernel against the slow oracle, its vectors against
the reference implementation, and a load that needs no network and leaves logging alone."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noveld.featurize.encoder import EncoderUnavailable, StaticVectors
from noveld.featurize.pooling import mean_unit_rows, mean_unit_rows_reference

TEXTS = [
    "Earthquake of magnitude 7.8 strikes Nepal; hundreds dead in Kathmandu",
    "centrepoint winter white gala london",
    "Champion Products approves two-for-one stock split\n\nThe board said…",
    "",
    "   ",
    "日本 株式市場 上昇",
    "the " * 400,
]


@pytest.fixture(scope="module")
def encoder() -> StaticVectors:
    return StaticVectors(256)


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 12),
    dim=st.integers(1, 9),
    lengths=st.lists(st.integers(0, 6), min_size=1, max_size=8),
    seed=st.integers(0, 2**31 - 1),
)
def test_pooling_kernel_matches_its_oracle_exactly(
    rows: int, dim: int, lengths: list[int], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((rows, dim)).astype(np.float32)
    bounds = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = rng.integers(0, rows, int(bounds[-1])).astype(np.int64)
    out = np.zeros((len(lengths), dim))
    mean_unit_rows(table, ids, bounds, out)
    assert np.array_equal(out, mean_unit_rows_reference(table, ids, bounds))


def test_vectors_are_the_oracles_on_fixed_texts(encoder: StaticVectors) -> None:
    vectors, has = encoder.encode(TEXTS)
    tokens = encoder.token_ids(TEXTS)
    assert np.array_equal(
        vectors, mean_unit_rows_reference(encoder.table, tokens.ids, tokens.bounds)
    )
    # only the empty text has no token: blanks are tokens of their own to the BPE model, so the
    # featurizer, not the encoder, decides that a text without words has no content
    assert has.tolist() == [True, True, True, False, True, True, True]
    norms = np.linalg.norm(vectors, axis=1)
    assert np.allclose(norms[has], 1.0) and np.all(norms[~has] == 0.0)


def test_truncation_is_the_leading_columns_renormalised(encoder: StaticVectors) -> None:
    """Matryoshka: a 64-d vector is the direction of the first 64 columns of the same mean."""
    small = StaticVectors(64)
    tokens = encoder.token_ids(TEXTS[:3])
    sums = np.stack(
        [encoder.table[tokens.ids[a:b]].astype(np.float64).sum(axis=0)
         for a, b in zip(tokens.bounds[:-1], tokens.bounds[1:], strict=True)]
    )  # fmt: skip
    head = sums[:, :64] / np.linalg.norm(sums[:, :64], axis=1, keepdims=True)
    assert np.allclose(small.encode(TEXTS[:3])[0], head, atol=1e-12)
    assert small.model_id == "wordllama/l2_supercat@64" != encoder.model_id


def test_related_texts_are_closer_than_unrelated(encoder: StaticVectors) -> None:
    v, _ = encoder.encode(
        [
            "earthquake kills hundreds in nepal",
            "nepal quake death toll rises",
            "apple unveils new iphone",
        ]
    )
    assert v[0] @ v[1] > v[0] @ v[2] + 0.1


def test_unknown_dimension_and_missing_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="one of"):
        StaticVectors(100)
    with pytest.raises(EncoderUnavailable, match="cannot read the encoder"):
        StaticVectors(64, root=tmp_path)


_PROBE = """
import json, logging, sys
root = logging.getLogger()
before = (root.level, list(root.handlers))
from noveld.featurize.encoder import StaticVectors
v, has = StaticVectors(128).encode(["hello world"])
print(json.dumps({
    "norm": float((v[0] ** 2).sum()),
    "imported": sorted(m for m in ("wordllama", "huggingface_hub", "requests") if m in sys.modules),
    "logging_untouched": (root.level, list(root.handlers)) == before,
}))
"""


def test_loads_without_network_and_leaves_logging_alone() -> None:
    cmd = [sys.executable, "-c", _PROBE]
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        cmd = [unshare, "-n", *cmd]  # a network namespace with no interface at all
    env = {"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert abs(report["norm"] - 1.0) < 1e-12
    assert report["imported"] == []
    assert report["logging_untouched"]


_PARITY = """
import json, sys
import numpy as np
from tokenizers import Tokenizer
from noveld.featurize.encoder import StaticVectors, _package_dir, _TOKENIZER
from wordllama.inference import WordLlamaInference
texts = json.loads(sys.argv[1])
ours = StaticVectors(256)
tokenizer = Tokenizer.from_file(str(_package_dir("wordllama") / _TOKENIZER))
theirs = WordLlamaInference(ours.table, tokenizer)
print(float(np.abs(theirs.embed(texts, norm=True) - ours.encode(texts)[0]).max()))
"""


def test_vectors_match_the_reference_implementation() -> None:
    """WordLlama's own inference (run apart: importing it configures the root logger)."""
    texts = [t for t in TEXTS if t.strip()]
    done = subprocess.run(
        [sys.executable, "-c", _PARITY, json.dumps(texts)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert float(done.stdout) < 1e-6  # float32 pooling there, float64 here
