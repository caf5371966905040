"""The generative engines a spec names (``engine = "trtllm"`` or ``"vllm"``), built on this host.

``accelbench agent`` calls ``build_engines`` for its job's target before the pipeline runs: for each model
served by a recipe engine it writes the recipe folder (``accelbench quantize``), runs ``build_engine.sh
check`` (the right device and the toolchain, docs/quantization.md) and then ``build_engine.sh build``. A
missing toolchain or a wrong device ends the job in the script's own one line; models served by
triton-python are left to the pipeline.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from accelbench.documents import VariantManifest
from accelbench.errors import BadInputError, ToolchainMissingError
from accelbench.experiment.spec import DEFAULT_ENGINE, ExperimentSpec, ModelSpec
from accelbench.hardware.catalog import HardwareTarget
from accelbench.models.toolchains import llm_recipes


@dataclass(frozen=True)
class BuiltEngine:
    model: str
    target: str
    precision: str
    engine: str
    folder: Path


def _recipe_engine(spec: ExperimentSpec, model: ModelSpec) -> str | None:
    """The recipe engine that serves ``model`` on the spec's one target, or None (triton-python, or vLLM run
    by the pipeline itself on a cpu or NVIDIA datacenter target: experiment/vllm_stage.py)."""
    target = spec.targets[0]
    engine = spec.engine_for(model, target)
    if engine == DEFAULT_ENGINE:
        return None
    if engine == "vllm":
        from accelbench.hardware.catalog import load_catalog
        from accelbench.models.toolchains.llm_recipes import vllm_serves

        try:
            if vllm_serves(load_catalog(None).get(target.id)):
                return None
        except BadInputError:
            pass
    return engine


def recipe_models(spec: ExperimentSpec) -> list[tuple[ModelSpec, str]]:
    """(model, engine) for every model of a one-target spec that a recipe engine serves."""
    engines = [(m, _recipe_engine(spec, m)) for m in spec.models]
    return [(m, e) for m, e in engines if e is not None]


def without_recipe_models(spec: ExperimentSpec) -> ExperimentSpec | None:
    """The spec with only the models the pipeline serves (None when none is left for the pipeline)."""
    left = tuple(m for m in spec.models if _recipe_engine(spec, m) is None)
    return replace(spec, models=left) if left else None


def precisions_for(model: ModelSpec, target: HardwareTarget) -> list[str]:
    """The model's precisions the target's recipe builds, else the recipe's default precision."""
    module = llm_recipes.target_module(target)
    ok = [p for p in model.precisions if p in module.precisions(target) and not module.refusal(target, p)]
    return ok or [module.default_precision(target)]


def build_engines(
    spec: ExperimentSpec,
    work: Path,
    catalog_path: str | None,
    log: Callable[[str], None],
    write: Callable[[Any], VariantManifest] | None = None,
) -> list[BuiltEngine]:
    """Write and build every recipe engine of a one-target spec here; one-line errors as the script says.

    ``write(QuantizeRequest)`` makes the recipe folder and returns its manifest (``accelbench quantize``)."""
    from accelbench.hardware.catalog import load_catalog
    from accelbench.models.quantize import QuantizeRequest, quantize

    write = write or (lambda request: quantize(request)[-1])
    target = load_catalog(catalog_path).get(spec.targets[0].id)
    built = []
    for model, engine in recipe_models(spec):
        llm_recipes.check_engine(target, engine)
        for precision in precisions_for(model, target):
            request = QuantizeRequest(
                model=model.uri,
                target=target.id,
                precision=precision,
                out_dir=work / "variants",
                catalog_path=catalog_path,
                engine=engine,
            )
            manifest = write(request)
            if manifest.format != "hf-checkpoint":
                raise BadInputError(f"{model.uri}: engine {engine!r} serves generative models only")
            folder = work / "variants" / manifest.name
            for action in ("check", "build"):
                code, last = llm_recipes.run_script(folder, action, log)
                if code != 0:
                    raise ToolchainMissingError(f"{target.id}: {manifest.name}: {last or f'exit {code}'}")
            built.append(BuiltEngine(model.uri, target.id, precision, engine, folder))
    return built


def prepare(
    spec: ExperimentSpec,
    work: Path,
    catalog_path: str | None,
    log: Callable[[str], None],
    write: Callable[[Any], VariantManifest] | None = None,
) -> ExperimentSpec:
    """Build the spec's recipe engines; returns the spec the pipeline measures (its triton-python models)."""
    if not recipe_models(spec):
        return spec
    built = build_engines(spec, work, catalog_path, log, write)
    for engine in built:
        log(f"{engine.folder.name}: {engine.engine} engine built in {engine.folder / llm_recipes.ENGINE_DIR}")
    rest = without_recipe_models(spec)
    if rest is None:
        names = ", ".join(e.folder.name for e in built)
        raise ToolchainMissingError(
            f"built {names} in {work / 'variants'}; accelbench run does not measure trtllm/vllm servers yet "
            f"(serve with build_engine.sh serve and measure its OpenAI endpoint)"
        )
    return rest
