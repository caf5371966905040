"""What both ways of making variants share (graphs in quantize.py, generative models in quantize_llm.py): the
request, reuse of a variant folder that is still intact, and progress lines."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelbench.documents import VariantManifest, to_dict
from accelbench.errors import BadInputError
from accelbench.models.manifest import read_manifest, verify_files

CALIBRATION_SAMPLES = 32
HELD_OUT_SAMPLES = 32

log = logging.getLogger(__name__)


@dataclass
class QuantizeRequest:
    model: str  # builtin:NAME, a card .toml, hf:..., or an .onnx file
    target: str  # catalog id
    precision: str | None = None
    out_dir: Path = Path("variants")
    recipe: str | None = None
    catalog_path: str | None = None
    calibration_samples: int = CALIBRATION_SAMPLES
    held_out_samples: int = HELD_OUT_SAMPLES
    options: dict[str, Any] = field(
        default_factory=dict
    )  # extra VariantOptions fields (probe, dla_core, ...)
    engine: str | None = None  # generative models: trtllm / vllm ask for the accelerator recipe's folder
    reference: Path | None = None  # the float graph of a source that is already quantized


def progress(line: str) -> None:
    """Progress of a long step, as a log record: the CLI shows accelbench.models' records on stderr (so --json
    output stays clean); a library caller chooses where they go."""
    log.info(line)


def reusable_variant(out: Path, source: dict[str, str], recipe: str | None) -> VariantManifest | None:
    """The existing manifest when the folder was made from the same source and recipe and is intact."""
    if not (out / "manifest.json").is_file():
        return None
    try:
        old = read_manifest(out)
    except BadInputError:
        return None
    same = to_dict(old.source) == source and (recipe is None or old.recipe == recipe)
    return old if same and not verify_files(out, old) else None
