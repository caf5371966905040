"""`accelbench run` specs with generative models: the [workload] table and the TTFT/TPOT objectives in [slo],
and the load profile a text-generation variant gets (a streaming sweep) beside a classic one's."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelbench.errors import BadInputError
from accelbench.experiment import pipeline
from accelbench.experiment.spec import load_spec, parse_spec
from tests.test_manifest import variant_manifest

EXAMPLE = Path(__file__).parent.parent / "examples" / "llm.toml"


def test_the_example_spec():
    spec = load_spec(EXAMPLE)
    assert spec.models[0].uri == "builtin:llama-tiny"
    assert (spec.workload.api, spec.workload.isl, spec.workload.osl) == ("triton", 64, 32)
    assert (spec.slo.ttft_p99_ms, spec.slo.tpot_p99_ms) == (500, 50)


@pytest.mark.parametrize(("old", "new", "message"), [
    ("isl = 64", "isl = 0", "workload.isl: 0 must be a whole number"),
    ("isl_range = 1.0", "isl_range = 1.5", "workload.isl_range: 1.5 must be in (0, 1]"),
    ('api = "triton"', 'api = "openai"', "workload.api: 'openai' is not one of triton, triton-grpc"),
    ("tpot_p99_ms = 50", "tpot_p99_ms = -1", "slo.tpot_p99_ms"),
    ("isl = 64", "isl = 64\nbogus = 1", "workload.bogus: unknown key"),
])  # fmt: skip
def test_bad_workload_values_are_one_line(old, new, message):
    with pytest.raises(BadInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_spec(EXAMPLE.read_text().replace(old, new), "llm.toml")


def test_a_generative_variant_gets_a_streaming_profile(tmp_path):
    spec = load_spec(EXAMPLE)
    (tmp_path / "tokenizer").mkdir()
    empty = pipeline._Variant(
        tmp_path, variant_manifest(name="llama-tiny__cpu-local__fp32", card={"task": "text-generation"})
    )
    # a folder without tokenizer.json is no tokenizer: the recorded default stands in
    assert pipeline._profile(spec, 1, empty).workload.tokenizer == "builtin:minilm-wordpiece"
    (tmp_path / "tokenizer" / "tokenizer.json").write_text("{}")
    gen = pipeline._Variant(
        tmp_path, variant_manifest(name="llama-tiny__cpu-local__fp32", card={"task": "text-generation"})
    )
    profile = pipeline._profile(spec, 1, gen)
    w = profile.workload
    assert (w.api, w.isl, w.osl, w.slo_ttft_p99_ms, w.slo_tpot_p99_ms) == (
        "triton",
        64,
        32,
        500,
        50,
    )
    assert w.tokenizer == str(tmp_path / "tokenizer")  # the variant's own tokenizer folder
    assert profile.label() == "closed-triton-i64-o32" and profile.levels == (1, 8)
    classic = pipeline._profile(
        spec, 1, pipeline._Variant(tmp_path, variant_manifest(name="x", card={"task": "embedding"}))
    )
    assert classic.workload is None and "workload" not in classic.to_dict()
