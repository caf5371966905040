"""The variant manifest: schema, hashes, validation messages naming file and field."""

from __future__ import annotations

import json

import pytest

from accelbench.documents import VariantManifest, load_manifest
from accelbench.errors import BadInputError
from accelbench.models.manifest import (
    SCHEMA,
    manifest_hash,
    read_manifest,
    variant_name,
    verify_files,
    write_manifest,
)
from accelbench.util import sha256_file


def minimal_manifest(**overrides):
    m = {
        "name": "minilm-l6__c7i-xlarge__int8",
        "model": "minilm-l6",
        "card": {"name": "minilm-l6"},
        "source": {"uri": "builtin:minilm-l6", "sha256": "0" * 64},
        "target": "c7i.xlarge",
        "precision": "int8",
        "recipe": "ort-dynamic-int8-per-channel",
        "format": "onnx",
        "model_file": "model.onnx",
        "toolchain": {"name": "onnxruntime", "version": "1.31.1"},
        "inputs": [{"name": "input_ids", "dtype": "int64", "shape": [-1, 128]}],
        "outputs": [{"name": "sentence_embedding", "dtype": "float32", "shape": [-1, 384]}],
        "calibration": None,
        "accuracy": {
            "metric": "cosine",
            "value": 0.995,
            "worst": 0.99,
            "tolerance": 0.99,
            "samples": 32,
            "verdict": "PASS",
            "reason": "",
        },
        "graph_cost": None,
        "engine": None,
    }
    m.update(overrides)
    return m


def variant_manifest(manifest_hash_: str | None = None, **overrides) -> VariantManifest:
    """A validated manifest without a folder: ``minimal_manifest`` with files, date and hash filled in."""
    data = {
        "schema": SCHEMA,
        **minimal_manifest(**overrides),
        "files": {},
        "created_at": "2026-01-01T00:00:00Z",
    }
    data["manifest_hash"] = manifest_hash_ or manifest_hash(data)
    return load_manifest(data)


@pytest.mark.parametrize(
    ("model", "target", "precision", "expected"),
    [
        ("minilm-l6", "c7i.xlarge", "int8", "minilm-l6__c7i-xlarge__int8"),
        ("resnet50", "l4", "fp16", "resnet50__l4__fp16"),
        ("bert-base", "inf2.xlarge", "bf16", "bert-base__inf2-xlarge__bf16"),
    ],
)
def test_variant_name(model, target, precision, expected):
    assert variant_name(model, target, precision) == expected


def test_write_then_read_round_trip(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"onnx bytes")
    (tmp_path / "reference").mkdir()
    (tmp_path / "reference" / "inputs.npz").write_bytes(b"npz")
    written = write_manifest(tmp_path, minimal_manifest())
    on_disk = json.loads((tmp_path / "manifest.json").read_text())
    assert on_disk["schema"] == SCHEMA
    assert on_disk["files"] == {
        "model.onnx": sha256_file(tmp_path / "model.onnx"),
        "reference/inputs.npz": sha256_file(tmp_path / "reference" / "inputs.npz"),
    }
    assert on_disk["manifest_hash"] == manifest_hash(on_disk)
    back = read_manifest(tmp_path)
    assert back == written
    assert back.precision == "int8" and back.verdict == "PASS"
    assert verify_files(tmp_path) == []
    (tmp_path / "model.onnx").write_bytes(b"changed")
    assert verify_files(tmp_path) == ["model.onnx"]


def test_hash_ignores_created_at_but_not_content(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"a")
    first = write_manifest(tmp_path, minimal_manifest(created_at="2020-01-01T00:00:00+00:00"))
    second = write_manifest(tmp_path, minimal_manifest(created_at="2030-01-01T00:00:00+00:00"))
    assert first.manifest_hash == second.manifest_hash
    (tmp_path / "model.onnx").write_bytes(b"b")
    third = write_manifest(tmp_path, minimal_manifest())
    assert third.manifest_hash != first.manifest_hash


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda m: m.pop("target"), "target"),
        (lambda m: m.update(precision="int3"), "precision"),
        (lambda m: m.update(format="tflite"), "format"),
        (lambda m: m.update(inputs="x"), "inputs"),
        (lambda m: m.update(inputs=[{"name": "x"}]), "inputs[0].dtype"),
        (lambda m: m["accuracy"].update(verdict="OK"), "accuracy.verdict"),
        (lambda m: m.update(engine={"status": "maybe"}), "engine.status"),
        (lambda m: m.update(schema="accelbench.variant/2"), "schema"),
        (lambda m: m.update(source={"uri": "x"}), "source.sha256"),
    ],
)
def test_read_rejects_bad_field_naming_file_and_field(tmp_path, mutate, field):
    (tmp_path / "model.onnx").write_bytes(b"a")
    write_manifest(tmp_path, minimal_manifest())
    data = json.loads((tmp_path / "manifest.json").read_text())
    mutate(data)
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    with pytest.raises(BadInputError) as info:
        read_manifest(tmp_path)
    message = str(info.value)
    assert str(tmp_path / "manifest.json") in message
    assert f"'{field}'" in message
    assert "\n" not in message


def test_read_missing_and_malformed(tmp_path):
    with pytest.raises(BadInputError, match="no variant manifest"):
        read_manifest(tmp_path)
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(BadInputError, match="not valid JSON"):
        read_manifest(tmp_path / "manifest.json")


def test_write_refuses_invalid(tmp_path):
    with pytest.raises(BadInputError, match="'precision'"):
        write_manifest(tmp_path, minimal_manifest(precision="int3"))
    assert not (tmp_path / "manifest.json").exists()
