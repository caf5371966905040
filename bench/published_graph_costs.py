"""Graph costs (FLOPs, bytes, op count and depth) of the published models, from graphs built here.

    .venv/bin/python bench/published_graph_costs.py [--models resnet50 bert-large-384 ...]

The efficiency model (``accelbench/reports/efficiency.py``) divides a published throughput by the roofline
bound of the same model, so it needs each published model's graph cost. Rather than quote FLOP counts from
papers, every cost here is counted by ``accelbench.models.graph_cost`` over a graph built with the same
builders as the built-in models (random weights; only shapes matter):

- ``resnet50``: ``builtin:resnet50`` (ResNet-50 v1.5, 224×224) — the MLPerf and Neuron ResNet-50.
- ``resnet101`` / ``resnet152``: the same bottleneck builder with (3, 4, 23, 3) / (3, 8, 36, 3) blocks.
- ``bert-base-128``: ``builtin:bert-base`` (12 layers, 768 wide, sequence 128); ``bert-base-384`` the same
  encoder at sequence 384 (TensorRT's demoBERT tables).
- ``bert-large-128`` / ``bert-large-384``: the encoder builder at 24 layers, 1024 wide, 16 heads, FFN 4096,
  sequence 128 / 384 (MLPerf's BERT is BERT-Large on SQuAD at 384; its 2-logit span head is not built, the
  builder's pooler stands in — both are < 0.01 % of the FLOPs).
- ``distilbert-128``: the encoder builder at 6 layers, 768 wide (DistilBERT has no token-type table and no
  pooler; together ~0.6 M of its 66 M parameters).

Prints the ``[models.*]`` tables of ``accelbench/hardware/published_results.toml``. Building BERT-Large takes
~1.4 GB of memory and a minute on two cores.
"""

from __future__ import annotations

import argparse
import gc

from accelbench.models.builtin import SEED, build_builtin
from accelbench.models.builtin.resnet import build_resnet
from accelbench.models.builtin.transformer import BERT_BASE, EncoderSpec, build_encoder
from accelbench.models.graph_cost import graph_cost

PRECISIONS = ("fp32", "bf16", "fp16", "int8")
BERT_LARGE = EncoderSpec(layers=24, hidden=1024, heads=16, ffn=4096, head="bert")


BUILDERS = {
    "resnet50": lambda: build_builtin("resnet50"),
    "resnet101": lambda: build_resnet("resnet101", SEED, (3, 4, 23, 3)),
    "resnet152": lambda: build_resnet("resnet152", SEED, (3, 8, 36, 3)),
    "bert-base-128": lambda: build_builtin("bert-base"),
    "bert-base-384": lambda: build_encoder(
        "bert-base-384", EncoderSpec(**{**BERT_BASE.__dict__, "seq_len": 384}), SEED
    ),
    "bert-large-128": lambda: build_encoder("bert-large-128", BERT_LARGE, SEED),
    "bert-large-384": lambda: build_encoder(
        "bert-large-384", EncoderSpec(**{**BERT_LARGE.__dict__, "seq_len": 384}), SEED
    ),
    "distilbert-128": lambda: build_encoder(
        "distilbert-128", EncoderSpec(**{**BERT_BASE.__dict__, "layers": 6}), SEED
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(BUILDERS), choices=list(BUILDERS))
    args = parser.parse_args()
    for name in args.models:
        model = BUILDERS[name]()
        for precision in PRECISIONS:
            cost = graph_cost(model, batch_size=1, precision=precision)
            print(f'[models."{name}".{precision}]')
            print(f"params = {cost.params}")
            print(f"flops_per_inference = {cost.flops_per_inference:.0f}")
            print(f"weight_bytes = {cost.weight_bytes}")
            print(f"activation_bytes_per_inference = {cost.activation_bytes_per_inference:.0f}")
            print(f"ops = {cost.ops}")
            print(f"depth = {cost.depth}")
            print()
        del model
        gc.collect()


if __name__ == "__main__":
    main()
