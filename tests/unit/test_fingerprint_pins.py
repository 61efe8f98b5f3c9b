"""The model fingerprint of each model kind on default settings, pinned byte for byte: state
directories and Redis namespaces written before keep loading only while these stay the same."""

from __future__ import annotations

import json
from typing import Any

import pytest

from noveld.daemon.settings import load_settings, model_fingerprint

_COMMON = (
    '"schema": 1, "kind": "{kind}", "likelihood": "{likelihood}", "alpha": 0.03, '
    '"beta": 0.01, "alpha_scaling": "batch", "discount": 0.5, "half_life_docs": 0.0, '
)
_TOKENIZER = '"lowercase": true, "min_token_len": 1'

PINNED: list[tuple[dict[str, Any], str]] = [
    ({}, "{" + _COMMON.format(kind="dpmm", likelihood="multinomial") + _TOKENIZER + "}"),
    (
        {"likelihood": "edcm"},
        "{"
        + _COMMON.format(kind="dpmm", likelihood="edcm")
        + '"edcm_prior": 0.001, "edcm_prior_docs": 5.0, '
        + _TOKENIZER
        + "}",
    ),
    (
        {"likelihood": "vmf", "embedding_dim": 16},
        "{"
        + _COMMON.format(kind="dpmm", likelihood="vmf")
        + '"embedding_dim": 16, "vmf_cosine": 0.5, '
        + _TOKENIZER
        + "}",
    ),
    (
        {"kind": "svi"},
        "{"
        + _COMMON.format(kind="svi", likelihood="multinomial")
        + '"kappa": 0.8, "tau0": 1.0, "corpus_size": 0.0, '
        + _TOKENIZER
        + "}",
    ),
    (
        {"kind": "hdp"},
        "{"
        + _COMMON.format(kind="hdp", likelihood="multinomial")
        + '"topics": 2000, "zeta": 0.0005, "gamma": 10.0, "table_alpha": 1.0, '
        + '"use_context": true, "context_prior": 0.1, '
        + _TOKENIZER
        + "}",
    ),
]


@pytest.mark.parametrize(("model", "pinned"), PINNED, ids=lambda x: json.dumps(x)[:40])
def test_default_fingerprint_of_each_kind_is_unchanged(model: dict[str, Any], pinned: str) -> None:
    assert json.dumps(model_fingerprint(load_settings(None, {"model": model}))) == pinned


def test_fingerprint_follows_the_settings_it_names() -> None:
    """A kind's own setting changes its fingerprint; another kind's does not."""
    base = model_fingerprint(load_settings(None, {"model": {"kind": "hdp"}}))
    topics = model_fingerprint(load_settings(None, {"model": {"kind": "hdp", "topics": 300}}))
    kappa = model_fingerprint(load_settings(None, {"model": {"kind": "hdp", "kappa": 0.9}}))
    assert topics == {**base, "topics": 300}
    assert kappa == base
