"""`accelbench quantize --out <run>/variants` with the default recipes stamps its variants as `accelbench run`
does, so a run with ``--out <run>`` serves them instead of quantizing again (tests/test_corpus.py relies on it
to quantize the corpus once); a forced ``--recipe`` is not what a run would make and is not stamped."""

from __future__ import annotations

import subprocess

import pytest

from accelbench.experiment.pipeline import _reusable_variants, _stamp
from tests.conftest import ACCELBENCH, IDENTITY_MODEL


def _quantize(out, *extra: str) -> None:
    cmd = [ACCELBENCH, "quantize", "builtin:identity", "--target", "cpu-local", "--out", str(out), *extra]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr


@pytest.mark.slow
def test_a_quantized_variant_is_reused_by_run_and_a_touched_one_is_not(tmp_path):
    variants = tmp_path / "run" / "variants"
    _quantize(variants, "--precision", "fp32")
    stamp = _stamp(variants, "builtin:identity", "cpu-local", "fp32")
    [reused] = _reusable_variants(stamp)
    assert reused.name == IDENTITY_MODEL and reused.dir == variants / IDENTITY_MODEL
    (variants / IDENTITY_MODEL / "model.onnx").write_bytes(b"changed")  # a file no longer as recorded
    assert _reusable_variants(stamp) is None


@pytest.mark.slow
def test_a_forced_recipe_is_not_stamped(tmp_path):
    _quantize(tmp_path / "forced", "--precision", "fp32", "--recipe", "fp32-reference")
    assert (tmp_path / "forced" / IDENTITY_MODEL / "manifest.json").is_file()
    assert not (tmp_path / "forced" / ".done").exists()
