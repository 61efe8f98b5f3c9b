"""Settings reach the model as given, and values the model cannot use stop the start (exit 2)
with the reason, never silently and never with a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from noveld.daemon.cli import _MODEL_FLAGS, _overrides, build_parser, ignored_flags, main
from noveld.daemon.settings import load_settings, unknown_env_names

# a valid value for every model flag, other than its default
SAMPLES: dict[str, str] = {
    "alpha": "0.07",
    "beta": "0.02",
    "alpha_scaling": "none",
    "discount": "0.25",
    "rejuvenation_sweeps": "3",
    "half_life_docs": "500",
    "retire_min_mass": "0.1",
    "max_active_clusters": "77",
    "seed": "9",
    "topics": "300",
    "zeta": "0.001",
    "gamma": "4",
    "table_alpha": "2",
    "context_prior": "0.3",
    "likelihood": "edcm",
    "edcm_prior": "0.002",
    "edcm_prior_docs": "3",
    "edcm_long_words": "60",
    "edcm_long_prior": "0.005",
    "edcm_long_prior_docs": "20",
    "edcm_background_docs": "10",
    "embedding_dim": "12",
    "vmf_cosine": "0.6",
    "featurizer": "semantic",
    "encoder_dim": "128",
    "hybrid_cosine": "0.6",
    "view_weight": "0.5",
    "document_concentration": "7",
}
#: the other model settings a flag's sample needs to be accepted
COMPANIONS: dict[str, dict[str, object]] = {
    "featurizer": {"likelihood": "vmf", "embedding_dim": 0},
}


@pytest.mark.parametrize(("flag", "key", "typ"), [(f, k, t) for f, k, t, _ in _MODEL_FLAGS])
def test_every_model_flag_reaches_the_settings(flag: str, key: str, typ: type) -> None:
    """``--half-life`` was parsed under another name and silently dropped: every flag is
    checked here."""
    ns = build_parser().parse_args(["run", flag, SAMPLES[key]])
    assert _overrides(ns)["model"][key] == typ(SAMPLES[key])
    model = {**_overrides(ns)["model"], "embedding_dim": 12, **COMPANIONS.get(key, {})}
    settings = load_settings(None, {"model": model})
    assert getattr(settings.model, key) == typ(SAMPLES[key])


@pytest.mark.parametrize(
    "model",
    [
        {"alpha": float("inf")},
        {"beta": float("inf")},
        {"half_life_docs": float("inf")},
        {"half_life_docs": -5.0},
        {"half_life_docs": float("nan")},
        {"retire_min_mass": float("inf")},
        {"zeta": float("inf")},
        {"seed": -1},
        {"kind": "svi", "half_life_docs": 500.0},  # svi would ignore it
    ],
)
def test_values_the_model_cannot_use_are_refused(model: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        load_settings(None, {"model": model})


@pytest.mark.parametrize("field", ["id", "text", "label", "ts"])
def test_empty_field_names_are_refused(field: str) -> None:
    with pytest.raises(ValidationError, match="at least 1 character"):
        load_settings(None, {"fields": {field: ""}})


def test_empty_state_dir_is_refused_not_taken_for_the_working_directory(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOVELD_STATE__DIR", "")
    with pytest.raises(ValidationError, match="is empty"):
        load_settings()


def test_unknown_environment_names_are_found() -> None:
    env = {
        "NOVELD_STATE_DIR": "/x",  # one underscore: a typo of NOVELD_STATE__DIR
        "NOVELD_FOO": "1",
        "NOVELD_STATE__DIR": "/x",
        "NOVELD_NAMESPACE": "n",
        "NOVELD_TEST_REDIS": "redis://h",  # the test harness's own
        "PATH": "/bin",
    }
    assert unknown_env_names(env) == ["NOVELD_FOO", "NOVELD_STATE_DIR"]


def test_cli_warns_about_unknown_environment_names(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("NOVELD_STATE_DIR", "/x")
    assert main(["config", "show"]) == 0
    err = capsys.readouterr().err
    assert "NOVELD_STATE_DIR" in err and "ignored" in err


def test_cli_refuses_bad_values_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (
        ["config", "show", "--seed", "-1"],
        ["config", "show", "--half-life", "inf"],
        ["config", "show", "--alpha", "inf"],
        ["config", "show", "--id-field", ""],
    ):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "invalid configuration" in err and "Traceback" not in err


def test_unreadable_configuration_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Broken TOML, a config file that is not UTF-8, a directory given as the config file,
    and a whole section in one environment variable that is not JSON."""
    broken = tmp_path / "broken.toml"
    broken.write_text("namespace = \n")
    utf16 = tmp_path / "utf16.toml"
    utf16.write_bytes('namespace = "x"\n'.encode("utf-16"))
    cases = {
        str(broken): "is not valid TOML: Invalid value (at line 1, column 13)",
        str(utf16): "is not UTF-8 text",
        str(tmp_path): "is not a file",
    }
    for path, message in cases.items():
        assert main(["config", "show", "--config", path]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    monkeypatch.setenv("NOVELD_MODEL", "garbage")
    assert main(["config", "show"]) == 2
    err = capsys.readouterr().err
    assert '"model"' in err and "NOVELD_MODEL__ALPHA" in err and "Traceback" not in err


def test_a_config_file_value_of_the_wrong_type_is_refused_not_coerced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pydantic's lax mode reads ``max_docs = true`` as 1 and ``deterministic = "no"`` as
    false; in a TOML file, where every value has its type, that is a mistake to name. Integers
    for floats, and ``events.assignments = true`` (documented), stay accepted."""
    cfg = tmp_path / "c.toml"
    cases = {
        "[batch]\nmax_docs = true": "batch.max_docs is a boolean (true); it takes a whole number",
        '[model]\ndeterministic = "no"': 'model.deterministic is a string ("no"); it takes true',
        '[model]\nalpha = "0.1"': 'model.alpha is a string ("0.1"); it takes a number',
        "[model]\nseed = 1.0": "model.seed is a float (1.0); it takes a whole number",
        "[tokenizer]\nlowercase = 1": "tokenizer.lowercase is an integer (1); it takes true",
        "metrics_port = 9100.0": "metrics_port is a float (9100.0); it takes a whole number",
    }
    for text, said in cases.items():
        cfg.write_text(text + "\n")
        assert main(["config", "show", "--config", str(cfg)]) == 2, text
        err = capsys.readouterr().err
        assert f"config file {cfg}: {said}" in err and err.count("\n") == 1, err
    cfg.write_text("metrics_port = 9100\n[model]\nalpha = 1\n[events]\nassignments = true\n")
    settings = load_settings(cfg)
    assert settings.model.alpha == 1.0 and settings.events.assignments == "document"


def test_cli_tools_refuse_bad_arguments_before_working(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "a", "text": "x y", "label": "1"}\n')
    assert main(["evaluate", str(data), "--window", "0"]) == 2
    assert "--window must be at least 1" in capsys.readouterr().err
    assert main(["generate", "--docs", "5", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["demo", "--docs", "0"]) == 2
    assert "at least one document" in capsys.readouterr().err
    for port in ("70000", "0", "x"):
        with pytest.raises(SystemExit) as usage:  # argparse's usage error
            main(["check", "--metrics-port", port])
        assert usage.value.code == 2
        assert "is not a port (1-65535)" in capsys.readouterr().err
    with pytest.raises(ValidationError, match="rejuvenation_sweeps"):
        load_settings(None, {"model": {"rejuvenation_sweeps": 100_000_000}})


def test_evaluate_reports_the_invalid_records_it_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in.jsonl"
    lines = [f'{{"id": "{i}", "text": "w{i % 3} x", "label": "{i % 3}"}}' for i in range(30)]
    data.write_text("\n".join([*lines, "garbage", '{"id": "no-text"}']) + "\n")
    assert main(["evaluate", str(data), "--json"]) == 0
    out = capsys.readouterr()
    assert '"invalid_records": 2' in out.out and '"docs": 30' in out.out
    assert "2 invalid records were skipped" in out.err


def test_evaluate_with_nothing_to_score_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty file, or one whose every record is invalid, is not a report of zeros."""
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("garbage\n" + '{"id": "no-text"}\n')
    for path, said in ((empty, "no valid document in"), (bad, "(2 invalid records")):
        assert main(["evaluate", str(path), "--json"]) == 2
        out = capsys.readouterr()
        assert out.out == "" and said in out.err


def test_evaluate_stopped_by_the_circuit_breaker_scores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """evaluate used to score the part of the file read before the breaker opened (exit 0, a
    report that passed for the whole file's) and to advise resuming from a DLQ in a temporary
    directory already gone."""
    data = tmp_path / "in.jsonl"
    good = [f'{{"id": "{i}", "text": "w{i % 3} x", "label": "{i % 3}"}}' for i in range(30)]
    data.write_text("\n".join([*good[:15], *["garbage"] * 12, *good[15:]]) + "\n")
    for extra in ((), ("--json",)):
        assert main(["evaluate", str(data), "--max-consecutive-invalid", "10", *extra]) == 3
        out = capsys.readouterr()
        assert out.out == ""
        assert "Nothing is scored" in out.err and "resume" not in out.err, out.err
    # a limit above the run of garbage scores every valid document
    assert main(["evaluate", str(data), "--max-consecutive-invalid", "20", "--json"]) == 0
    assert '"docs": 30' in capsys.readouterr().out


def test_config_show_takes_the_run_flags(capsys: pytest.CaptureFixture[str]) -> None:
    """config show refused --redis-url, --state-dir, --metrics-port and the Kafka flags, so it
    could not show what a given noveld run line would use."""
    argv = ["--metrics-port", "9", "--kafka-bootstrap", "h:1", "--input-topic", "t"]
    assert main(["config", "show", *argv, "--state-dir", "sd", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["metrics_port"] == 9 and shown["kafka"]["input_topic"] == "t"
    assert shown["state"]["dir"] == "sd"


def test_illegal_kafka_topic_names_are_refused_at_start() -> None:
    """An illegal events topic used to fail at the first event, after its commit: every restart
    then failed again on the event waiting in the outbox."""
    for name in ("bad/topic", "", "x" * 250, ".."):
        with pytest.raises(ValidationError, match="legal Kafka topic name"):
            load_settings(None, {"kafka": {"events_topic": name}})
    ok = load_settings(None, {"kafka": {"events_topic": "news.events_v2-1"}})
    assert ok.kafka.events_topic == "news.events_v2-1"


def test_kafka_settings_that_loop_or_mean_nothing_are_refused() -> None:
    """Events or dead letters on the input topic were read back (a dead letter went around
    until the circuit breaker); a blank bootstrap list quietly meant stdin; an empty group id."""
    for kafka, why in (
        ({"input_topic": "docs", "events_topic": "docs"}, "input_topic and kafka.events_topic"),
        ({"input_topic": "docs", "dlq_topic": "docs"}, "input_topic and kafka.dlq_topic"),
        ({"events_topic": "x", "dlq_topic": "x"}, "events_topic and kafka.dlq_topic"),
        ({"bootstrap_servers": ""}, "bootstrap_servers is empty"),
        ({"bootstrap_servers": " , "}, "bootstrap_servers is empty"),
        ({"group": ""}, "group"),
    ):
        with pytest.raises(ValidationError, match=why):
            load_settings(None, {"kafka": kafka})


def test_run_refuses_a_kafka_topic_without_a_broker_and_two_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--input-topic`` without ``--kafka-bootstrap`` read stdin and exited 0 (a restart loop
    in a container); ``--input`` with ``--kafka-bootstrap`` ignored the file."""
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": "a", "text": "x y"}\n')
    assert main(["run", "--input-topic", "docs", "--input", str(data)]) == 2
    assert "--input-topic docs needs --kafka-bootstrap" in capsys.readouterr().err
    argv = ["run", "--kafka-bootstrap", "127.0.0.1:9", "--input-topic", "d", "--input", str(data)]
    assert main(argv) == 2
    assert "either --input" in capsys.readouterr().err
    assert main(["run", "--kafka-bootstrap", "", "--input", str(data)]) == 2
    assert "bootstrap_servers is empty" in capsys.readouterr().err


@pytest.mark.parametrize("bad", ["host:notaport", ":::", "h:0", "h:70000", "h:", "[::1", "[]:1"])
def test_a_malformed_bootstrap_address_is_refused(bad: str) -> None:
    """Checked with the settings, so ``run`` and ``produce`` refuse it alike (produce died
    with a traceback inside kafka-python)."""
    with pytest.raises(ValidationError, match="is not host"):
        load_settings(None, {"kafka": {"bootstrap_servers": f"ok:9092,{bad}"}})


@pytest.mark.parametrize("good", ["h", "h:9092", "10.0.0.1:9093, k2:9092", "[::1]:9092", "[::1]"])
def test_bootstrap_addresses_kafka_takes_are_accepted(good: str) -> None:
    assert load_settings(None, {"kafka": {"bootstrap_servers": good}}).kafka.bootstrap_servers


def test_flags_the_settings_do_not_read_are_said_not_dropped(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A model's flag given with another model, or state-dir snapshot flags with Redis, would
    otherwise change nothing without a word."""

    def said(*argv: str) -> list[str]:
        head = [] if "--input-topic" in argv else ["--input", "-"]
        ns = build_parser().parse_args(["run", *head, *argv])
        return ignored_flags(ns, load_settings(None, _overrides(ns)))

    assert said("--topics", "9", "--ignore-context", "--edcm-prior", "0.1") == [
        "--topics is read by --model hdp only; ignored with --model dpmm",
        "--ignore-context is read by --model hdp only; ignored with --model dpmm",
        "--edcm-prior is read by --likelihood edcm only; ignored with --likelihood hybrid",
    ]
    assert said("--model", "hdp", "--topics", "9", "--vmf-cosine", "0.4") == [
        "--vmf-cosine is read by --likelihood vmf only; ignored with --model hdp"
    ]
    assert said("--likelihood", "vmf", "--embedding-dim", "8", "--vmf-cosine", "0.4") == []
    assert said("--model", "hdp", "--alpha", "5", "--rejuvenation-sweeps", "3") == [
        "--alpha is read by --model dpmm or svi only; ignored with --model hdp"
    ]
    assert said("--model", "svi", "--alpha", "5", "--rejuvenation-sweeps", "3") == [
        "--rejuvenation-sweeps is read by --model dpmm or hdp only; ignored with --model svi"
    ]
    assert said("--model", "hdp", "--document-concentration", "50") == []
    assert said("--likelihood", "edcm", "--document-concentration", "50") == [
        "--document-concentration is read by --model svi or hdp and dpmm's --likelihood "
        "multinomial or hybrid only; ignored with --likelihood edcm"
    ]
    redis = ["--redis-url", "redis://127.0.0.1:1/0"]
    assert said(*redis, "--state-dir", "s", "--snapshot-interval", "3") == [
        "--snapshot-interval is ignored with --redis-url (every batch commits)",
        "--state-dir holds no state with --redis-url (Redis does) (the dead-letter file still "
        "goes there)",
    ]
    assert said(*redis, "--state-dir", "s", "--dlq", "d.jsonl") == [
        "--state-dir holds no state with --redis-url (Redis does)"
    ]
    assert said("--group", "g", "--kafka-sasl-username", "u") == [
        "--group, --kafka-sasl-username are read in Kafka mode only (--kafka-bootstrap)"
    ]
    kafka = [*redis, "--kafka-bootstrap", "127.0.0.1:9092", "--input-topic", "docs"]
    assert said(*kafka, "--group", "g", "--dlq-topic", "dead") == []
    assert said(*kafka, "--state-dir", "s", "--dlq", "d.jsonl") == [
        "--state-dir holds no state with --redis-url (Redis does)",
        "--dlq is ignored in Kafka mode (dead letters go to kafka.dlq_topic)",
    ]
    assert main(["config", "show", "--zeta", "0.1"]) == 0
    assert "noveld: warning: --zeta is read by --model hdp only" in capsys.readouterr().err

    def said_by(command: str, *argv: str) -> list[str]:
        ns = build_parser().parse_args([command, "in.jsonl", *argv])
        return ignored_flags(ns, load_settings(None, _overrides(ns)))

    assert said_by("fit", "--emit-assignments", "--namespace", "n") == [
        "--emit-assignments is read by noveld run only; noveld fit emits no assignments"
    ]  # fit writes its namespace (Redis)
    assert said_by("evaluate", "--emit-assignment-batches", "--namespace", "n") == [
        "--emit-assignment-batches is read by noveld run only; noveld evaluate emits no "
        "assignments",
        "--namespace names a state; noveld evaluate keeps none",
    ]
