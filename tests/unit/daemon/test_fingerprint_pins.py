"""The model fingerprint of each model kind on default settings, pinned byte for byte: state
directories and Redis namespaces written before keep loading only while these stay the same."""

from __future__ import annotations

import json
from typing import Any

import pytest

from noveld.daemon.model_registry import make_model
from noveld.daemon.settings import load_settings, model_fingerprint
from noveld.models.edcm import EDCMConfig

_COMMON = (
    '"schema": 1, "kind": "{kind}", "likelihood": "{likelihood}", "alpha": 0.03, '
    '"beta": 0.01, "alpha_scaling": "batch", "discount": 0.5, "half_life_docs": 0.0, '
)
_TOKENIZER = '"lowercase": true, "min_token_len": 1'

PINNED: list[tuple[dict[str, Any], str]] = [
    (
        {},
        "{"
        + _COMMON.format(kind="dpmm", likelihood="hybrid")
        + '"embedding_dim": 256, "hybrid_cosine": 0.4, "view_weight": null, '
        + '"document_concentration": 15.0, "featurizer": "hybrid", '
        + '"encoder": "wordllama/l2_supercat@256", "encoder_dim": 256, '
        + _TOKENIZER
        + "}",
    ),
    (
        {"likelihood": "multinomial"},
        "{" + _COMMON.format(kind="dpmm", likelihood="multinomial") + _TOKENIZER + "}",
    ),
    (
        {"likelihood": "edcm"},
        "{"
        + _COMMON.format(kind="dpmm", likelihood="edcm")
        + '"edcm_prior": 0.001, "edcm_prior_docs": 5.0, "edcm_long_words": 40.0, '
        + '"edcm_long_prior": 0.003, "edcm_long_prior_docs": 40.0, "edcm_background_docs": 40.0, '
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
        + '"kappa": 0.8, "tau0": 1.0, "corpus_size": 0.0, "document_concentration": 50.0, '
        + _TOKENIZER
        + "}",
    ),
    (
        {"kind": "hdp"},
        "{"
        + _COMMON.format(kind="hdp", likelihood="hybrid")
        + '"topics": 2000, "zeta": 0.0005, "gamma": 10.0, "table_alpha": 1.0, '
        + '"use_context": true, "context_prior": 0.1, '
        + '"embedding_dim": 256, "hybrid_cosine": 0.4, "view_weight": null, '
        + '"featurizer": "hybrid", "encoder": "wordllama/l2_supercat@256", "encoder_dim": 256, '
        + _TOKENIZER
        + "}",
    ),
    (
        {"kind": "hdp", "featurizer": "words"},
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


def test_edcm_settings_default_to_the_models_own_defaults() -> None:
    """The edcm settings (part of its fingerprint) start where ``EDCMConfig`` does, so the
    daemon runs the model as tuned; a changed model default must be changed here too (and
    the pin above, deliberately)."""
    settings = load_settings(None, {"model": {"likelihood": "edcm"}})
    built = make_model(settings).config
    assert isinstance(built, EDCMConfig)
    defaults = EDCMConfig()
    for key in ("prior", "prior_docs", "long_words", "long_words_full", "long_prior",
                "long_prior_docs", "background_docs"):  # fmt: skip
        assert getattr(built, key) == getattr(defaults, key), key


def test_edcm_long_words_moves_the_whole_ramp() -> None:
    """``edcm_long_words`` moves where the long-document prior starts and where it is full."""
    model = {"likelihood": "edcm", "edcm_long_words": 80.0, "edcm_background_docs": 0.0}
    config = make_model(load_settings(None, {"model": model})).config
    assert isinstance(config, EDCMConfig)
    width = EDCMConfig().long_words_full - EDCMConfig().long_words
    assert (config.long_words, config.long_words_full) == (80.0, 80.0 + width)
    assert config.background_docs == 0.0
    base = model_fingerprint(load_settings(None, {"model": {"likelihood": "edcm"}}))
    moved = model_fingerprint(load_settings(None, {"model": model}))
    assert moved == {**base, "edcm_long_words": 80.0, "edcm_background_docs": 0.0}


def _without_tempering(fingerprint: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fingerprint.items() if k != "document_concentration"}


@pytest.mark.parametrize(("kind", "default"), [("dpmm", 0.0), ("svi", 50.0), ("hdp", 0.0)])
def test_length_tempering_enters_a_words_fingerprint_only_when_on(
    kind: str, default: float
) -> None:
    """s of the words' length tempering changes a words model, so its fingerprint names it
    when it is on (svi's default, or given); off, the fingerprint is the one without it, so
    states written before the tempering existed keep loading."""
    words = {"kind": kind, "featurizer": "words"}
    base = model_fingerprint(load_settings(None, {"model": words}))
    off = load_settings(None, {"model": {**words, "document_concentration": 0.0}})
    on = load_settings(None, {"model": {**words, "document_concentration": 15.0}})
    assert base.get("document_concentration", 0.0) == default
    assert model_fingerprint(off) == _without_tempering(base)
    assert model_fingerprint(on) == {**_without_tempering(base), "document_concentration": 15.0}
    assert list(model_fingerprint(on))[-3:] == [
        "document_concentration",
        "lowercase",
        "min_token_len",
    ]
    assert make_model(on).config.document_concentration == 15.0
    assert make_model(off).config.document_concentration == 0.0


def test_each_model_takes_its_own_length_tempering_when_unset() -> None:
    """Unset, the hybrid tempers with s = 15, svi with 50, dpmm's words and hdp not at all
    (docs/model.md, "Length tempering in the words models")."""
    hybrid = load_settings(None, {"model": {"likelihood": "hybrid", "embedding_dim": 8}})
    assert model_fingerprint(hybrid)["document_concentration"] == 15.0
    assert make_model(hybrid).config.document_concentration == 15.0
    for kind, s in (("dpmm", 0.0), ("svi", 50.0), ("hdp", 0.0)):
        built = make_model(load_settings(None, {"model": {"kind": kind, "featurizer": "words"}}))
        assert built.config.document_concentration == s, kind
