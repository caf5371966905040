"""The load profile is defined once (loadtests/profiles.py): the loadtest options, the spec's [load] and
[workload] tables and the result document's load_profile all come from it, and the load_profile JSON is the
one the four earlier spellings wrote (stored documents stay resumable)."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from accelbench import documents
from accelbench.cli import main
from accelbench.commands.load_options import load_options, take, take_plan, workload_options
from accelbench.errors import BadInputError
from accelbench.experiment import pipeline
from accelbench.experiment.spec import load_spec, parse_spec
from accelbench.loadtests.knobs import knobs
from accelbench.loadtests.profiles import LoadPlan, LoadProfile, Workload
from tests.test_manifest import variant_manifest

ROOT = Path(__file__).resolve().parent.parent

# load_profile blocks as the code before the one definition wrote them (commit c258ff6), for the same inputs
OLD_CLI = {"batch_size": 1, "check_every": 100, "duration_s": None, "input_data": None, "kind": "closed",
           "levels": [1, 2], "max_duration_s": 60.0, "max_in_flight": 256, "processes": 1, "protocol": "http",
           "seed": 0, "shapes": [], "timeout_s": 30.0, "warmup_s": 2.0, "window_s": 1.0}  # fmt: skip
OLD_OPEN = {"batch_size": 4, "check_every": 10, "duration_s": 5.0, "input_data": "zero", "kind": "open",
            "levels": [100.0, 200.0], "max_duration_s": 30.0, "max_in_flight": 256, "processes": 2,
            "protocol": "grpc", "seed": 3, "shapes": ["x:1,2"], "timeout_s": 30.0, "warmup_s": 1.0,
            "window_s": 1.0}  # fmt: skip
OLD_GENERATIVE = {**OLD_CLI, "levels": [1, 4], "duration_s": 3.0, "workload": {
    "api": "openai-chat", "ignore_eos": False, "isl": 64, "isl_range": 1.0, "osl": 32, "osl_range": 1.0,
    "prompts": "synthetic", "prompts_sha256": None, "slo_tpot_p99_ms": None, "slo_ttft_p99_ms": 500.0,
    "tokenizer": "builtin:minilm-wordpiece"}}  # fmt: skip
OLD_SPEC_REPEAT_2 = {"batch_size": 1, "check_every": 100, "duration_s": 4, "input_data": None, "kind": "closed",
                     "levels": [1, 2, 4], "max_duration_s": 60, "max_in_flight": 256, "processes": 1,
                     "protocol": "http", "repeat": 2, "seed": 0, "shapes": [], "timeout_s": 30.0, "warmup_s": 2,
                     "window_s": 1}  # fmt: skip
OLD_SPEC_GENERATIVE = {**OLD_SPEC_REPEAT_2, "duration_s": 10, "levels": [1, 8], "max_duration_s": 20,
                       "window_s": 1.0, "workload": {
                           "api": "triton", "ignore_eos": True, "isl": 64, "isl_range": 1.0, "osl": 32,
                           "osl_range": 1.0, "prompts": "synthetic", "prompts_sha256": None, "slo_tpot_p99_ms": 50,
                           "slo_ttft_p99_ms": 500, "tokenizer": "builtin:minilm-wordpiece"}}  # fmt: skip
del OLD_SPEC_GENERATIVE["repeat"]


@click.command()
@load_options
@workload_options
def _options(**values):
    """The loadtest command's profile options, parsed as it parses them."""
    gen = take(Workload, values)
    plan = take_plan(values)
    profile = plan.profile
    if gen:
        gen.setdefault("api", "triton-grpc" if profile.protocol == "grpc" else "triton")
        profile = profile.streaming(Workload(**gen))
    click.echo(json.dumps({"profile": profile.to_dict(), "repeats": plan.repeats, "retries": plan.retries}))


def _parsed(*args: str) -> dict:
    result = CliRunner().invoke(_options, list(args))
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_command_line_profiles_are_recorded_as_before():
    assert _parsed("--concurrency", "1,2")["profile"] == OLD_CLI
    opened = _parsed("--rate", "100,200", "--protocol", "grpc", "--duration", "5", "--max-duration", "30",
                     "--warmup", "1", "--processes", "2", "--seed", "3", "--batch", "4", "--check-every", "10",
                     "--input-data", "zero", "--shape", "x:1,2", "--repeats", "3", "--retries", "0")  # fmt: skip
    assert opened == {"profile": OLD_OPEN, "repeats": 3, "retries": 0}
    generative = _parsed("--concurrency", "1,4", "--duration", "3", "--api", "openai", "--isl", "64", "--osl",
                         "32", "--slo-ttft-p99-ms", "500", "--no-ignore-eos")  # fmt: skip
    assert generative["profile"] == OLD_GENERATIVE


def test_spec_profiles_are_recorded_as_before(tmp_path):
    assert pipeline._profile(load_spec(None), 2).to_dict() == OLD_SPEC_REPEAT_2
    variant = pipeline._Variant(tmp_path, variant_manifest(name="llama-tiny__cpu-local__fp32", card={
        "task": "text-generation", "generative": {"tokenizer": "builtin:minilm-wordpiece"}}))  # fmt: skip
    assert (
        pipeline._profile(load_spec(ROOT / "examples" / "llm.toml"), 1, variant).to_dict()
        == OLD_SPEC_GENERATIVE
    )


@pytest.mark.parametrize(
    "recorded", [OLD_CLI, OLD_OPEN, OLD_GENERATIVE, OLD_SPEC_REPEAT_2, OLD_SPEC_GENERATIVE]
)
def test_a_stored_profile_reads_back_to_the_same_bytes(recorded):
    """A document's load_profile parses, becomes the profile, and is written again byte for byte."""
    doc = documents.LoadProfile.model_validate(json.loads(json.dumps(recorded)))
    profile = LoadProfile.from_dict(doc)
    assert documents.dump_json(profile.to_document()) == documents.dump_json(doc)
    assert profile.to_dict() == recorded


def test_every_flag_is_an_option_of_loadtest_and_every_recorded_field_is_typed_in_the_document():
    loadtest = main.commands["loadtest"]
    declared = {opt for param in loadtest.params for opt in [*param.opts, *param.secondary_opts]}
    for cls in (LoadProfile, Workload, LoadPlan):
        for _, k in knobs(cls):
            for flag in (k.flag or "").split("/"):
                assert not flag or flag in declared, flag
    run = {opt for param in main.commands["run"].params for opt in param.opts}
    assert {"--repeats", "--retries"} <= run
    assert set(LoadProfile(kind="closed", levels=(1,), repeat=2).to_dict()) <= set(
        documents.LoadProfile.model_fields
    )
    assert {f.name for f in dataclasses.fields(Workload)} == set(documents.Workload.model_fields)


def test_the_spec_takes_the_profile_keys_and_names_them():
    base = '[[models]]\nuri = "builtin:identity"\n[[targets]]\nid = "cpu-local"\nmode = "local"\n'
    spec = parse_spec(base + "[load]\nlevels = [2]\ncheck_every = 7\ntimeout_s = 9\n", "s.toml")
    assert (spec.load.profile.levels, spec.load.profile.check_every, spec.load.profile.timeout_s) == (
        (2,),
        7,
        9,
    )
    for table, message in (("[load]\nshapes = ['x:1']", "s.toml: load.shapes: unknown key; allowed: kind, levels"),
                           ("[load]\nseed = 1.5", "s.toml: load.seed: 1.5 must be a whole number"),
                           ("[load]\nretries = -1", "s.toml: load.retries: -1 must be a whole number >= 0"),
                           ("[workload]\nprompts_sha256 = 'x'", "s.toml: workload.prompts_sha256: unknown key")):  # fmt: skip
        with pytest.raises(BadInputError) as err:
            parse_spec(base + table, "s.toml")
        assert str(err.value).startswith(message), str(err.value)


def test_a_prompts_file_is_recorded_by_name_and_hash():
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.jsonl"
        path.write_text('{"prompt": "hi"}\n')
        given = Workload(prompts=str(path))
        assert given.prompts_file == str(path)
        recorded = given.recorded()
        assert (recorded.prompts, recorded.prompts_file, len(recorded.prompts_sha256)) == (
            "p.jsonl",
            None,
            64,
        )
        assert recorded.tokenizer == "builtin:minilm-wordpiece"
    with pytest.raises(BadInputError, match="--prompts .*: no such file"):
        Workload(prompts=str(Path(tmp) / "gone.jsonl")).recorded()
