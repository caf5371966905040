"""Model cards, input generation and MODEL resolution, on real TOML files and the built-in cards."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import onnx
import pytest

from accelbench.errors import BadInputError
from accelbench.models.builtin import build_builtin
from accelbench.models.card_writer import card_from_graph
from accelbench.models.cards import card_from_dict, load_card, load_model_repository
from accelbench.models.inputs import make_inputs
from accelbench.models.loader import resolve_model

DATA = Path(__file__).parent / "data" / "models"
BUILTINS = ["identity", "minilm-l6", "bert-base", "resnet50"]

GOOD_CARD = """
name = "tiny"
source = "onnx:tiny.onnx"
task = "other"
[[inputs]]
name = "x"
dtype = "float32"
shape = [-1, 16]
[generator]
kind = "uniform"
[accuracy]
metric = "max_abs"
tolerance = 0.001
"""


def _write(tmp_path: Path, text: str, name: str = "card.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_cards_load_and_round_trip(name: str) -> None:
    card = load_card(f"builtin:{name}")
    assert card.name == name and card.source == f"builtin:{name}"
    assert all(t.shape[0] == -1 for t in card.inputs)
    again = card_from_dict(card.to_dict())
    assert again == card


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ('name = "tiny"\n', "", "missing field 'name'"),
        ("shape = [-1, 16]", 'shape = "16"', "field 'inputs[0].shape': expected list"),
        (
            'source = "onnx:tiny.onnx"',
            'source = "s3:tiny.onnx"',
            "field 'source': 's3:tiny.onnx': unknown scheme; allowed: onnx:, hf:, builtin:",
        ),
        (
            'metric = "max_abs"',
            'metric = "f1"',
            "field 'accuracy.metric': unknown value 'f1'; allowed: cosine, top1, max_abs",
        ),
        ('kind = "uniform"', 'kind = "audio"', "field 'generator.kind': unknown value 'audio'"),
        ('dtype = "float32"', 'dtype = "float99"', "field 'inputs[0].dtype': unknown value 'float99'"),
        ("tolerance = 0.001", 'tolerance = "low"', "field 'accuracy.tolerance': expected float"),
        (
            'task = "other"',
            'task = "vision"',
            "field 'task': unknown value 'vision'; allowed: embedding, classification, detection, segmentation, other",
        ),
    ],
)
def test_bad_card_names_file_and_field(tmp_path: Path, old: str, new: str, expected: str) -> None:
    assert old in GOOD_CARD
    path = _write(tmp_path, GOOD_CARD.replace(old, new))
    with pytest.raises(BadInputError) as info:
        load_card(path)
    message = str(info.value)
    assert str(path) in message and expected in message
    assert "\n" not in message


def test_invalid_toml_and_missing_card(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="not a valid TOML model card"):
        load_card(_write(tmp_path, "name = [unclosed"))
    with pytest.raises(BadInputError, match="file not found"):
        load_card(tmp_path / "absent.toml")
    with pytest.raises(BadInputError, match="unknown built-in model 'nope'; available: bert-base"):
        load_card("builtin:nope")


def test_model_repository_one_card_per_toml(tmp_path: Path) -> None:
    _write(tmp_path, GOOD_CARD, "a.toml")
    _write(tmp_path, GOOD_CARD.replace('"tiny"', '"other"'), "b.toml")
    (tmp_path / "notes.txt").write_text("ignored")
    assert [c.name for c in load_model_repository(tmp_path)] == ["tiny", "other"]
    _write(tmp_path, GOOD_CARD, "c.toml")
    with pytest.raises(BadInputError, match="more than one card: tiny"):
        load_model_repository(tmp_path)


def test_tokens_inputs_are_deterministic_and_well_formed() -> None:
    card = load_card("builtin:bert-base")
    first = make_inputs(card, batch_size=4, count=3, seed=1)
    assert len(first) == 3
    for a, b in zip(first, make_inputs(card, 4, 3, seed=1), strict=True):
        assert all(np.array_equal(a[k], b[k]) for k in a)
    other = make_inputs(card, 4, 3, seed=2)
    assert not np.array_equal(first[0]["input_ids"], other[0]["input_ids"])
    for req in first:
        ids, mask, types = req["input_ids"], req["attention_mask"], req["token_type_ids"]
        assert ids.shape == mask.shape == types.shape == (4, 128) and ids.dtype == np.int64
        assert (ids[:, 0] == 101).all() and not types.any()
        assert mask.sum(axis=1).min() >= card.generator.min_len
        assert ((ids[:, 1:] >= 1000) & (ids[:, 1:] < 30522))[mask[:, 1:] == 1].all()
        assert (ids[mask == 0] == 0).all()
        # the mask is a prefix of ones then zeros
        assert (np.diff(mask, axis=1) <= 0).all()


def test_image_and_dataset_inputs() -> None:
    image = make_inputs(load_card("builtin:resnet50"), batch_size=2, count=1, seed=0)[0]["input"]
    assert image.shape == (2, 3, 224, 224) and image.dtype == np.float32
    assert abs(float(image.std()) - 1.0) < 0.05
    card = load_card(DATA / "identity-dataset.toml")
    rows = np.load(DATA / "identity_samples.npz")["x"]
    batches = make_inputs(card, batch_size=4, count=5, seed=3)  # 20 rows from 10: wraps around
    stacked = np.concatenate([b["x"] for b in batches])
    assert stacked.shape == (20, 16)
    assert {r.tobytes() for r in stacked[:10]} == {r.tobytes() for r in rows}
    assert np.array_equal(stacked[:10], stacked[10:])
    assert not np.array_equal(make_inputs(card, 4, 1, seed=4)[0]["x"], batches[0]["x"])


def test_dataset_missing_file(tmp_path: Path) -> None:
    text = (DATA / "identity-dataset.toml").read_text().replace("identity_samples.npz", "absent.npz")
    card = load_card(_write(tmp_path, text))
    with pytest.raises(BadInputError, match="file not found: .*absent.npz"):
        make_inputs(card, 1, 1, seed=0)


def test_resolve_card_with_relative_onnx_source(tmp_path: Path) -> None:
    onnx.save(build_builtin("identity"), tmp_path / "tiny.onnx")
    resolved = resolve_model(_write(tmp_path, GOOD_CARD))
    assert resolved.onnx_path == tmp_path / "tiny.onnx" and resolved.card.name == "tiny"
    (tmp_path / "tiny.onnx").unlink()
    with pytest.raises(BadInputError, match="file not found: .*tiny.onnx"):
        resolve_model(tmp_path / "card.toml")


def test_plain_onnx_gets_the_card_models_card_writes(tmp_path: Path) -> None:
    """One inferrer: a bare .onnx is resolved to the card `accelbench models card` writes for it (docs/models.md's
    guesses), with its source absolute and no card file."""
    onnx.save(build_builtin("minilm-l6"), tmp_path / "encoder.onnx")
    card = resolve_model(tmp_path / "encoder.onnx").card
    assert card.name == "encoder" and card.task == "embedding"
    assert [(t.name, t.dtype, t.shape) for t in card.inputs] == [
        ("input_ids", "int64", (-1, 128)),
        ("attention_mask", "int64", (-1, 128)),
    ]
    assert card.generator.kind == "tokens"
    assert (card.accuracy.metric, card.metric_output) == ("cosine", "sentence_embedding")
    onnx.save(build_builtin("identity"), tmp_path / "null.onnx")
    card = resolve_model(tmp_path / "null.onnx").card
    # y [N, 16]: no class axis, not one value per row: "other maps and heads", cosine
    assert (card.accuracy.metric, card.metric_output, card.generator.kind) == ("cosine", "y", "uniform")
    assert make_inputs(card, 3, 1, seed=0)[0]["x"].shape == (3, 16)
    for name in ("encoder", "null"):
        path = tmp_path / f"{name}.onnx"
        written = card_from_graph(path, card_dir=tmp_path)
        assert resolve_model(path).card == dataclasses.replace(
            written, source=f"onnx:{path.resolve()}", card_path=None
        )


@pytest.mark.parametrize("content", [b"", b"\x08\x07garbage" * 100, bytes(range(256)) * 40])
def test_malformed_onnx_is_bad_input(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.onnx"
    path.write_bytes(content)
    with pytest.raises(BadInputError, match=r"^not a valid ONNX model: .*broken.onnx \("):
        resolve_model(path)
