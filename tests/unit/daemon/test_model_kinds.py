"""The model-kind registry covers exactly the engine/likelihood pairs the settings accept, and
flags left out override nothing."""

from __future__ import annotations

import itertools
from typing import get_args

import pytest
from pydantic import ValidationError

from noveld.daemon.cli import _overrides, build_parser
from noveld.daemon.model_kinds import KINDS, kind_of, readers
from noveld.daemon.settings import ModelSettings, load_settings


def test_every_accepted_pair_has_a_kind_and_no_other_does() -> None:
    kinds = get_args(ModelSettings.model_fields["kind"].annotation)
    likelihoods = get_args(ModelSettings.model_fields["likelihood"].annotation)
    registered = {(k.kind, k.likelihood) for k in KINDS}
    for kind, likelihood in itertools.product(kinds, likelihoods):
        model = {"kind": kind, "likelihood": likelihood, "embedding_dim": 8}
        if (kind, likelihood) in registered:
            assert kind_of(load_settings(None, {"model": model}).model).kind == kind
        else:
            with pytest.raises(ValidationError):
                load_settings(None, {"model": model})


def test_every_kind_names_settings_that_exist() -> None:
    for k in KINDS:
        for key in (*k.own, *k.ignores, *k.fingerprint):
            assert key in ModelSettings.model_fields, (k, key)


def test_readers_in_a_flags_words() -> None:
    assert readers("topics") == "--model hdp"
    assert readers("vmf_cosine") == "--likelihood vmf"
    assert readers("alpha") == "--model dpmm or svi"
    assert readers("rejuvenation_sweeps") == "--model dpmm or hdp"
    assert readers("document_concentration") == (
        "--model svi or hdp and dpmm's --likelihood multinomial or hybrid"
    )


def test_flags_not_given_set_nothing() -> None:
    """A flag left out must not override the config file or the environment (a store_true
    flag's False among them)."""
    assert _overrides(build_parser().parse_args(["run"])) == {}


def test_every_kind_the_settings_admit_has_a_pipeline_variant() -> None:
    """The settings' registry and the pipeline's name the same (engine, likelihood) pairs, so
    a kind the settings accept can always be built."""
    from noveld.daemon.model_registry import VARIANTS, variant_of

    assert {(k.kind, k.likelihood) for k in KINDS} == set(VARIANTS)
    for k in KINDS:
        extra = {"embedding_dim": 8} if k.likelihood in ("vmf", "hybrid") else {}
        m = ModelSettings(kind=k.kind, likelihood=k.likelihood, **extra)
        assert (variant_of(m).kind, variant_of(m).likelihood) == (k.kind, k.likelihood)
