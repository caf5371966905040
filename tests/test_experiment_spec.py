"""The experiment spec: the default loads, `init` round-trips, bad values name the file and key."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from accelbench.cli import main
from accelbench.errors import BadInputError
from accelbench.experiment.spec import (
    ExperimentSpec,
    ModelSpec,
    TargetSpec,
    default_load,
    load_spec,
    parse_spec,
    write_example_spec,
)

MINIMAL = """
[[models]]
uri = "builtin:identity"
[[targets]]
id = "cpu-local"
mode = "local"
"""


def test_default_spec_is_the_documented_default():
    spec = load_spec(None)
    assert [m.uri for m in spec.models] == ["builtin:minilm-l6", "builtin:resnet50"]
    assert all(m.precisions == ("fp32", "int8") for m in spec.models)
    assert [t.id for t in spec.measured_targets] == ["cpu-local"]
    assert {t.id for t in spec.projected_targets} == {"l4", "l40s", "jetson-agx-orin-64gb", "inf2-xlarge"}
    assert spec.baseline == "a100-sxm4-80gb"
    assert spec.load.profile.levels == (1, 2, 4) and spec.load.profile.processes == 1


def test_init_writes_a_commented_spec_that_loads_back(tmp_path):
    result = CliRunner().invoke(main, ["init", str(tmp_path / "exp.toml")])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "exp.toml").read_text()
    assert text.count("\n#") > 10  # commented, not a bare dump
    assert load_spec(tmp_path / "exp.toml") == parse_spec(text, str(tmp_path / "exp.toml"))
    again = CliRunner().invoke(main, ["init", str(tmp_path / "exp.toml")])
    assert again.exit_code == 2 and "already exists" in again.output


def test_init_into_a_folder(tmp_path):
    path = write_example_spec(tmp_path)
    assert path.name == "accelbench.toml" and load_spec(path).name == "default"


def test_minimal_spec_gets_defaults():
    spec = parse_spec(MINIMAL, "m.toml")
    assert spec.models[0].precisions == ("fp32", "int8")
    assert spec.load == default_load()
    assert spec.load.profile.to_dict()["levels"] == [1, 2, 4] and spec.load.profile.duration_s == 5.0


@pytest.mark.parametrize(
    ("extra", "key", "allowed"),
    [
        ('[load]\nkind = "burst"', "load.kind", "closed, open"),
        ('[load]\nprotocol = "udp"', "load.protocol", "http, grpc"),
        ("[load]\nlevels = []", "load.levels", "at least one"),
        ("[load]\nlevels = [1.5]", "load.levels", "whole numbers"),
        ("[load]\nduration_s = -1", "load.duration_s", ">= 0"),
        ("[load]\nmax_duration_s = 0", "load.max_duration_s", "> 0"),
        ("[load]\nprocesses = 0", "load.processes", ">= 1"),
        ("[load]\nrepeats = 0", "load.repeats", "whole number >= 1"),
        ("[load]\nrepeats = 1.5", "load.repeats", "whole number >= 1"),
        ("[load]\nrepeats = true", "load.repeats", "whole number >= 1"),
        ("[load]\nwarmpu_s = 1", "load.warmpu_s", "allowed: kind"),
        ("[slo]\npercentile = 100", "slo.percentile", "between 50 and 100"),
        ('[price]\nbasis = "free"', "price.basis", "on-demand, spot, reserved"),
        ("[price.overrides]\nl4 = -2", "price.overrides.l4", "> 0"),
        ("colour = 1", "colour", "allowed:"),
    ],
)
def test_bad_values_name_file_key_and_allowed_values(extra, key, allowed):
    with pytest.raises(BadInputError) as err:
        text = MINIMAL + extra if extra.startswith("[") else extra + "\n" + MINIMAL  # top-level keys first
        parse_spec(text, "exp.toml")
    message = str(err.value)
    assert message.startswith(f"exp.toml: {key}: "), message
    assert allowed in message
    assert "\n" not in message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[[models]]\nuri = "s3:x"\n[[targets]]\nid = "l4"', "models[0].uri"),
        (
            '[[models]]\nuri = "builtin:x"\nprecisions = ["int2"]\n[[targets]]\nid = "l4"',
            "models[0].precisions",
        ),
        ('[[models]]\nuri = "builtin:x"\n[[targets]]\nid = "l4"\nmode = "remote"', "targets[0].mode"),
        ('[[models]]\nuri = "builtin:x"\n[[targets]]\nid = "l4"\nmode = "url"', "targets[0].url"),
        ('[[models]]\nuri = "builtin:x"\n[[targets]]\nid = "l4"\nurl = "http://h:8000"', "targets[0].url"),
        ('[[models]]\nuri = "builtin:x"\n[[targets]]\nid = "l4"\n[[targets]]\nid = "l4"', "targets"),
        ('[[targets]]\nid = "l4"', "models"),
        ('models = "builtin:x"\n[[targets]]\nid = "l4"', "models"),
    ],
)
def test_bad_models_and_targets(text, key):
    with pytest.raises(BadInputError) as err:
        parse_spec(text, "exp.toml")
    assert str(err.value).startswith(f"exp.toml: {key}: "), str(err.value)


def test_malformed_toml_and_missing_file(tmp_path):
    with pytest.raises(BadInputError, match="not valid TOML"):
        parse_spec("[[models]\n", "exp.toml")
    with pytest.raises(BadInputError, match="spec file not found"):
        load_spec(tmp_path / "nope.toml")


def test_only_target_measures_here_unless_a_url_is_given():
    spec = ExperimentSpec(
        models=(ModelSpec("builtin:identity"),),
        targets=(
            TargetSpec("cpu-local", "local"),
            TargetSpec("l4"),
            TargetSpec("l40s", "url", "http://h:8000"),
        ),
    )
    assert spec.only_target("l4").targets == (TargetSpec("l4", "local"),)
    assert spec.only_target("l40s").targets == (TargetSpec("l40s", "url", "http://h:8000"),)
    with pytest.raises(BadInputError, match="not in this spec"):
        spec.only_target("h100-sxm")


def test_cli_reports_a_bad_spec_in_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text(MINIMAL + '[load]\nkind = "burst"\n')
    result = CliRunner().invoke(main, ["run", str(bad)])
    assert result.exit_code == 2
    assert "load.kind" in result.output and "Traceback" not in result.output


def test_repeats_in_the_spec_and_on_the_command_line(tmp_path, monkeypatch):
    spec_file = tmp_path / "exp.toml"
    spec_file.write_text(MINIMAL + "[load]\nrepeats = 3\n")
    assert load_spec(spec_file).load.repeats == 3
    assert load_spec(None).load.repeats == 1
    seen = []

    def fake_run(spec, **kwargs):  # the pipeline itself is covered by the live tests
        seen.append(spec.load.repeats)
        raise SystemExit(0)

    monkeypatch.setattr("accelbench.experiment.pipeline.run_experiment", fake_run)
    assert CliRunner().invoke(main, ["run", str(spec_file)]).exit_code == 0
    assert CliRunner().invoke(main, ["run", str(spec_file), "--repeats", "5"]).exit_code == 0
    assert seen == [3, 5]


@pytest.mark.parametrize("command", [["run"], ["loadtest", "--url", "http://127.0.0.1:9", "--model", "m",
                                                "--concurrency", "1"]])  # fmt: skip
@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_repeats_option_is_one_line(command, value):
    exe = str(Path(sys.executable).parent / "accelbench")
    proc = subprocess.run([exe, *command, "--repeats", value], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and "--repeats" in lines[0], proc.stderr
