"""The typed result and variant documents: every committed document loads and round-trips byte for byte,
bad documents get one line naming the file and the field, and docs/schema/ is a fresh export."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest

from accelbench.documents import (
    FORMATS,
    RESULT_SCHEMA,
    VARIANT_PRECISIONS,
    VARIANT_SCHEMA,
    ResultDocument,
    Step,
    VariantManifest,
    describe_error,
    dump_json,
    json_schemas,
    load_manifest,
    load_result,
    to_dict,
)
from accelbench.errors import BadInputError

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "reports" / "cpu-local"


# Recordings of a document's shape, its measured values masked (tests/edge_documents.py): not documents.
SHAPE_RECORDINGS = "tests/data/edge/"


def _committed(schema: str) -> list[Path]:
    """Every JSON file in the repository (outside .git and virtualenvs) that claims ``schema``, but for the
    shape recordings of tests/data/edge (their measured values are masked, so they cannot validate)."""
    tracked = subprocess.run(
        ["git", "ls-files", "*.json"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    out = []
    for rel in tracked:
        if rel.startswith(SHAPE_RECORDINGS):
            continue
        try:
            data = json.loads((ROOT / rel).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("schema") == schema:
            out.append(ROOT / rel)
    return out


RESULTS = _committed(RESULT_SCHEMA)
MANIFESTS = _committed(VARIANT_SCHEMA)


def test_the_committed_results_are_found():
    names = {p.relative_to(ROOT).as_posix() for p in RESULTS}
    assert "bench/results/h200/2026-11-30/results/bert-base__h200-sxm__bf16.json" in names
    assert len([n for n in names if n.startswith("tests/data/")]) >= 4


@pytest.mark.parametrize("path", RESULTS + MANIFESTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_committed_document_loads_and_round_trips(path):
    raw = json.loads(path.read_text())
    cls, load = (
        (ResultDocument, load_result) if raw["schema"] == RESULT_SCHEMA else (VariantManifest, load_manifest)
    )
    doc = load(path)
    assert to_dict(doc) == raw
    assert dump_json(doc) == json.dumps(raw, indent=2, sort_keys=True) + "\n"
    # through JSON text and back, as the server's database keeps it
    assert to_dict(cls.model_validate_json(doc.model_dump_json(by_alias=True, exclude_unset=True))) == raw


def _doc() -> dict:
    return json.loads((DATA / "minilm-l6__cpu-local__int8__closed-http-b1.json").read_text())


def test_typed_fields_read_as_attributes_and_ints_stay_ints():
    doc = load_result(_doc())
    step = doc.steps[0]
    assert step.offered.concurrency == 1 and step.latency_us.p99_9 == 26800.0
    assert step.server_stats.compute_infer_us == 14320 and isinstance(step.server_stats.compute_infer_us, int)
    assert doc.load_profile.duration_s == 10 and isinstance(doc.load_profile.duration_s, int)
    assert doc.graph_cost.weight_bytes == 34406400 and doc.accuracy.verdict == "PASS"


def test_old_request_rate_is_read_as_rate_rps():
    raw = _doc()
    raw["steps"][0]["offered"] = {"request_rate": 250.0}
    step = load_result(raw).steps[0]
    assert step.offered.rate_rps == 250.0
    assert to_dict(step)["offered"] == {"rate_rps": 250.0}


def test_unknown_keys_round_trip_everywhere():
    raw = _doc()
    raw["campaign"] = {"id": "c1"}
    raw["provenance"]["agent"] = "host-a"
    raw["steps"][0]["loadgen"] = {"processes": 1, "future": [1, 2]}
    raw["steps"][0]["latency_us"]["p99.99"] = 30000.0
    assert to_dict(load_result(raw)) == raw


def test_a_writer_states_its_fields_and_numpy_scalars_are_plain_numbers():
    step = Step(
        index=0, offered={"concurrency": np.int64(4)}, verdict="VALID", throughput_rps=np.float64(2.5)
    )
    assert to_dict(step) == {
        "index": 0,
        "offered": {"concurrency": 4},
        "verdict": "VALID",
        "throughput_rps": 2.5,
    }
    assert type(to_dict(step)["throughput_rps"]) is float


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["steps"][0]["latency_us"].update(p99="fast"),
            "field 'steps[0].latency_us.p99': must be a number",
        ),
        (lambda d: d["steps"][0]["latency_us"].update({"p99.9": True}), "'steps[0].latency_us.p99.9'"),
        (lambda d: d["steps"][0].pop("verdict"), "field 'steps[0].verdict': Field required"),
        (lambda d: d["steps"][0].update(verdict="OK"), "field 'steps[0].verdict'"),
        (lambda d: d.pop("run_id"), "field 'run_id': Field required"),
        (lambda d: d.update(steps={}), "field 'steps'"),
        (lambda d: d["load_profile"].update(kind="burst"), "field 'load_profile.kind'"),
        (lambda d: d.update(schema="accelbench.result/2"), "field 'schema' must be 'accelbench.result/1'"),
        (lambda d: d.pop("schema"), "field 'schema' must be 'accelbench.result/1', got None"),
    ],
)
def test_bad_result_names_the_file_and_the_field(tmp_path, mutate, expected):
    raw = _doc()
    mutate(raw)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(BadInputError) as info:
        load_result(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and expected in message and "\n" not in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [(None, "file not found"), ("{nope", "not valid JSON"), ("[1, 2]", "not a JSON object")],
)
def test_unreadable_result_files(tmp_path, content, expected):
    path = tmp_path / "r.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(BadInputError, match=expected):
        load_result(path)


def test_bad_manifest_names_the_field():
    with pytest.raises(BadInputError, match=r"^manifest.json: field 'schema' must be 'accelbench.variant/1'"):
        load_manifest({"schema": RESULT_SCHEMA}, "manifest.json")
    with pytest.raises(BadInputError, match=r"^m: field 'name': Field required \(and \d+ more\)"):
        load_manifest({"schema": VARIANT_SCHEMA}, "m")


def test_one_formatter_words_pydantic_errors_and_request_errors_alike():
    """``describe_error`` is the one formatter of validation errors: the documents' own, and the service's for
    FastAPI's request errors (a list of error dicts whose location starts with where the value came from)."""
    from pydantic import BaseModel, ValidationError

    class Call(BaseModel):
        runner_id: int
        attempt: int

    with pytest.raises(ValidationError) as caught:
        Call.model_validate({"runner_id": "x"})
    assert describe_error(caught.value).startswith("field 'runner_id': Input should be a valid integer")
    assert describe_error(caught.value).endswith(" (and 1 more)")
    query = [
        {"loc": ("query", "slo_p99_ms"), "msg": "Input should be greater than 0", "type": "greater_than"}
    ]
    assert describe_error(query, skip=("query",)) == "field 'slo_p99_ms': Input should be greater than 0"
    body = [{"loc": ("body",), "msg": "Field required"}, {"loc": ("body", "steps", 3, "index"), "msg": "x"}]
    assert (
        describe_error(body, skip=("body",), whole="request")
        == "field 'request': Field required (and 1 more)"
    )
    assert describe_error(body[1:], skip=("body",)) == "field 'steps[3].index': x"


def test_committed_json_schemas_are_a_fresh_export():
    for name, text in json_schemas().items():
        committed = ROOT / "docs" / "schema" / name
        assert committed.read_text() == text, (
            f"{committed} is stale: python -m accelbench.documents --export docs/schema"
        )
    result = json.loads(json_schemas()["result.schema.json"])
    assert result["properties"]["schema"]["const"] == RESULT_SCHEMA
    assert "rate_rps" in result["$defs"]["Offered"]["properties"]


def test_export_command_writes_the_schemas(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "accelbench.documents", "--export", str(tmp_path)], check=True, cwd=ROOT
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["result.schema.json", "variant.schema.json"]


@pytest.mark.slow
def test_the_device_check_rebuilds_the_committed_h200_results(tmp_path):
    committed = ROOT / "bench" / "results" / "h200" / "2026-11-30"
    for name in ("summary.json", "probe.json"):
        (tmp_path / name).write_text((committed / name).read_text())
    cmd = [sys.executable, str(ROOT / "bench" / "device_check.py"), "--rebuild-results", str(tmp_path)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    for path in sorted((committed / "results").glob("*.json")):
        rebuilt, original = (json.loads(p.read_text()) for p in (tmp_path / "results" / path.name, path))
        for doc in (rebuilt, original):  # the method text names the interpreter's file, which has moved since
            doc["provenance"].pop("method")
        assert json.dumps(rebuilt, sort_keys=True) == json.dumps(original, sort_keys=True), path.name


def test_the_exported_json_schemas_accept_what_accelbench_writes_and_reject_bad_documents(tmp_path):
    import jsonschema_rs

    from accelbench.models.manifest import write_manifest

    result = jsonschema_rs.validator_for(
        json.loads((ROOT / "docs" / "schema" / "result.schema.json").read_text())
    )
    for path in RESULTS:
        assert result.is_valid(json.loads(path.read_text())), path
    bad = _doc()
    bad["steps"][0]["verdict"] = "OK"
    assert [e.instance_path for e in result.iter_errors(bad)] == [["steps", 0, "verdict"]]
    variant = jsonschema_rs.validator_for(
        json.loads((ROOT / "docs" / "schema" / "variant.schema.json").read_text())
    )
    (tmp_path / "model.onnx").write_bytes(b"onnx")
    manifest = to_dict(
        write_manifest(
            tmp_path,
            {"name": "m__cpu-local__fp32", "model": "m", "card": {}, "source": {"uri": "builtin:m", "sha256": "0"},
             "target": "cpu-local", "precision": "fp32", "recipe": "fp32-reference", "format": "onnx",
             "model_file": "model.onnx", "toolchain": {"name": "onnxruntime", "version": "1"},
             "inputs": [{"name": "x", "dtype": "float32", "shape": [-1, 4]}], "outputs": [], "calibration": None,
             "accuracy": None, "graph_cost": None, "engine": None},
        )
    )  # fmt: skip
    assert variant.is_valid(manifest)
    assert not variant.is_valid({**manifest, "precision": "int3"})


def test_the_manifest_allows_exactly_the_named_formats_and_precisions():
    """FORMATS and VARIANT_PRECISIONS are what the manifest's fields accept (its Literal types)."""
    fields = VariantManifest.model_fields
    assert typing.get_args(fields["format"].annotation) == FORMATS
    assert typing.get_args(fields["precision"].annotation) == VARIANT_PRECISIONS
