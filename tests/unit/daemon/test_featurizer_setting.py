"""The ``featurizer`` setting: which engines and likelihoods take which featurizer, what joins
the fingerprint, and how the featurizer treats documents with no words or no vector."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from noveld.daemon.errors import UserError
from noveld.daemon.model_kinds import ENCODER_MODEL
from noveld.daemon.settings import load_settings, model_fingerprint
from noveld.daemon.stages import featurize as featurize_stage
from noveld.daemon.stages.featurize import Views, empty_detail, text_encoder
from noveld.featurize import Featurizer, Tokenizer
from noveld.featurize.encoder import EncoderUnavailable
from noveld.models.vocabulary import Vocabulary
from noveld.schema import DecodedDocument


def _model(**model: Any) -> Any:
    return load_settings(None, {"model": model}).model


def test_the_hybrid_is_the_default_of_dpmm_and_hdp_and_the_words_of_svi() -> None:
    for kind in ("dpmm", "hdp"):
        m = _model(kind=kind)
        assert (m.featurizer, m.encoder_dim, m.likelihood) == ("hybrid", 256, "hybrid")
    m = _model(kind="svi")
    assert (m.featurizer, m.likelihood) == ("words", "multinomial")
    m = _model(kind="hdp", featurizer="words")  # the words-only hdp, as it was
    assert m.likelihood == "multinomial"


@pytest.mark.parametrize(
    ("model", "views"),
    [
        ({"featurizer": "words"}, ("words", "multinomial")),
        ({"featurizer": "semantic"}, ("semantic", "vmf")),
        ({"likelihood": "multinomial"}, ("words", "multinomial")),
        ({"likelihood": "edcm"}, ("words", "edcm")),
        ({"likelihood": "vmf"}, ("semantic", "vmf")),
        ({"likelihood": "vmf", "embedding_dim": 8}, ("words", "vmf")),
        ({"embedding_dim": 8}, ("words", "hybrid")),  # the documents' own vectors
    ],
)
def test_an_unset_view_follows_the_one_that_is_set(
    model: dict[str, Any], views: tuple[str, str]
) -> None:
    m = _model(**model)
    assert (m.featurizer, m.likelihood) == views


def test_a_later_layer_engine_derives_the_views_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment sets a dpmm setting and the command line the engine: the derived
    likelihood follows the engine instead of refusing the hybrid it would have been."""
    monkeypatch.setenv("NOVELD_MODEL__ALPHA", "0.05")
    m = load_settings(None, {"model": {"kind": "svi"}}).model
    assert (m.kind, m.likelihood, m.featurizer, m.alpha) == ("svi", "multinomial", "words", 0.05)
    monkeypatch.setenv("NOVELD_MODEL__LIKELIHOOD", "hybrid")  # set, so it is kept, and refused
    with pytest.raises(ValidationError, match="is a dpmm or hdp option"):
        load_settings(None, {"model": {"kind": "svi"}})


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ({"kind": "svi", "featurizer": "semantic"}, "natural-gradient"),
        ({"kind": "hdp", "featurizer": "semantic"}, "hdp reads words and vectors"),
        ({"likelihood": "multinomial", "featurizer": "semantic"}, "needs --likelihood vmf"),
        ({"likelihood": "edcm", "featurizer": "hybrid"}, "reads words only"),
        ({"likelihood": "vmf", "featurizer": "hybrid"}, "use --featurizer semantic"),
        ({"likelihood": "hybrid", "featurizer": "semantic"}, "reads words too"),
        ({"likelihood": "hybrid", "featurizer": "words"}, "needs vectors"),
        ({"likelihood": "vmf", "featurizer": "words"}, "--featurizer semantic"),
        ({"likelihood": "vmf", "featurizer": "semantic", "encoder_dim": 100}, "encoder_dim"),
        (
            {"likelihood": "hybrid", "featurizer": "hybrid", "embedding_dim": 64},
            "differs from model.encoder_dim",
        ),
    ],
)
def test_combinations_no_model_can_run_are_refused_with_the_way_out(
    model: dict[str, Any], says: str
) -> None:
    with pytest.raises(ValidationError, match=says):
        _model(**model)


@pytest.mark.parametrize(
    "model",
    [
        {"likelihood": "vmf", "featurizer": "semantic"},
        {"likelihood": "vmf", "featurizer": "semantic", "encoder_dim": 64, "embedding_dim": 64},
        {"likelihood": "hybrid", "featurizer": "hybrid", "encoder_dim": 128},
        {"likelihood": "hybrid", "embedding_dim": 32},  # the documents' own embeddings
    ],
)
def test_the_combinations_that_run_are_accepted(model: dict[str, Any]) -> None:
    _model(**model)


def test_the_fingerprint_names_the_featurizer_encoder_and_dimension() -> None:
    fp = model_fingerprint(
        load_settings(None, {"model": {"likelihood": "hybrid", "featurizer": "hybrid"}})
    )
    assert fp["featurizer"] == "hybrid"
    assert fp["encoder"] == f"{ENCODER_MODEL}@256" and fp["encoder_dim"] == 256
    assert (fp["embedding_dim"], fp["hybrid_cosine"], fp["view_weight"]) == (256, 0.4, None)
    semantic = model_fingerprint(
        load_settings(None, {"model": {"likelihood": "vmf", "featurizer": "semantic"}})
    )
    own = model_fingerprint(
        load_settings(None, {"model": {"likelihood": "vmf", "embedding_dim": 256}})
    )
    # the same model on the same dimension: only the featurizer's keys tell them apart
    assert {k for k in semantic if semantic[k] != own.get(k)} == {
        "featurizer",
        "encoder",
        "encoder_dim",
    }
    smaller = model_fingerprint(
        load_settings(
            None, {"model": {"likelihood": "vmf", "featurizer": "semantic", "encoder_dim": 64}}
        )
    )
    assert smaller["encoder"] == f"{ENCODER_MODEL}@64" and smaller["embedding_dim"] == 64


def test_words_fingerprints_ignore_the_encoder_settings() -> None:
    """States written before the featurizer existed keep loading: under words the encoder's
    settings are not in the fingerprint."""
    words = {"likelihood": "multinomial"}
    fp = model_fingerprint(load_settings(None, {"model": {**words, "encoder_dim": 64}}))
    assert fp == model_fingerprint(load_settings(None, {"model": words}))
    assert "featurizer" not in fp and "encoder" not in fp


def test_the_encoder_id_is_the_encoders_own() -> None:
    from noveld.featurize.encoder import WORDLLAMA_DIMENSIONS, WORDLLAMA_MODEL

    assert ENCODER_MODEL == WORDLLAMA_MODEL
    assert WORDLLAMA_DIMENSIONS == (64, 128, 256)


def test_a_missing_encoder_is_a_one_line_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def unavailable(dimension: int) -> Any:
        raise EncoderUnavailable("the 'wordllama' package is not installed: pip install wordllama")

    monkeypatch.setattr(featurize_stage, "shared_encoder", unavailable)
    with pytest.raises(UserError) as err:
        text_encoder(_model(likelihood="vmf", featurizer="semantic"))
    assert "\n" not in str(err.value) and "--featurizer semantic" in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__
    assert text_encoder(_model(featurizer="words")) is None  # words never load it


class _FakeEncoder:
    """Texts to vectors by their first letter; a text starting with '#' has no token."""

    model_id = "fake@4"
    dimension = 4

    def encode(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        out = np.zeros((len(texts), 4))
        has = np.zeros(len(texts), dtype=bool)
        for i, t in enumerate(texts):
            if t and not t.startswith("#"):
                out[i, ord(t[0]) % 4] = 1.0
                has[i] = True
        return out, has


def _docs() -> list[DecodedDocument]:
    return [
        DecodedDocument(id="a", text="alpha beta"),  # words and a vector
        DecodedDocument(id="b", text="#### only words here"),  # words, no vector
        DecodedDocument(id="c", text="gamma", embedding=[0.0, 3.0, 0.0, 4.0]),  # its own vector
        DecodedDocument(id="d", text=""),  # nothing
    ]


def _featurizer(words_view: bool) -> Featurizer:
    return Featurizer(
        Tokenizer(), Vocabulary(), embedding_dim=4, encoder=_FakeEncoder(), words_view=words_view
    )


def test_semantic_dead_letters_a_text_with_no_vector() -> None:
    batch, empty = _featurizer(words_view=False).featurize(_docs())
    assert empty == [1, 3] and len(batch) == 2
    assert batch.emb is not None
    assert np.allclose(batch.emb[1], [0.0, 0.6, 0.0, 0.8])  # the document's own embedding
    assert np.allclose(np.linalg.norm(batch.emb, axis=1), 1.0)
    assert "no token the encoder knows" in empty_detail(_docs()[1], Views("vector", True))


def test_hybrid_clusters_a_text_with_no_vector_by_its_words() -> None:
    batch, empty = _featurizer(words_view=True).featurize(_docs())
    assert empty == [3] and len(batch) == 3
    assert batch.emb is not None and not batch.emb[1].any()  # words only: a zero row
    assert batch.lengths.tolist() == [2, 3, 1]
    assert "no tokens" in empty_detail(_docs()[3], Views("both", True))


def test_hybrid_leaves_a_text_without_words_out_though_the_encoder_gives_it_a_vector() -> None:
    """Punctuation or symbols get an encoder vector but carry no story (as under words);
    a document's own embedding is its vector whatever its words."""
    docs = [
        DecodedDocument(id="p", text="!!! ???"),
        DecodedDocument(id="o", text="!!! ???", embedding=[1.0, 0.0, 0.0, 0.0]),
        DecodedDocument(id="w", text="apple"),
    ]
    f = _featurizer(words_view=True)
    assert all(i in f.vectors_of(docs) for i in (0, 1, 2))  # the encoder reads "!!!"
    batch, empty = f.featurize(docs)
    assert empty == [0] and batch.lengths.tolist() == [0, 1]


def test_hybrid_read_only_scoring_keeps_a_document_with_a_vector() -> None:
    f = _featurizer(words_view=True)
    f.featurize(_docs())
    batch, empty = f.featurize([DecodedDocument(id="e", text="zzz unseen")], grow=False)
    assert empty == [] and len(batch) == 1 and batch.lengths.tolist() == [0]
    batch, empty = f.featurize([DecodedDocument(id="f", text="#zzz unseen")], grow=False)
    assert empty == [0]


def test_centre_vectors_reaches_the_hybrid_and_leaves_the_fingerprint_alone() -> None:
    """Centring changes how vectors are scored, not what the statistics hold: a namespace
    resumes with it on or off."""
    from noveld.daemon.cli import _overrides, build_parser
    from noveld.daemon.model_registry import make_model

    ns = build_parser().parse_args(["run", "--centre-vectors"])
    on = load_settings(None, _overrides(ns))
    off = load_settings(None, {})
    assert on.model.centre_vectors and not off.model.centre_vectors
    assert make_model(on).config.centre and not make_model(off).config.centre  # type: ignore[attr-defined]
    assert model_fingerprint(on) == model_fingerprint(off)
