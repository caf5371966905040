"""BERT-style encoders (post-LayerNorm, GELU-erf FFN) for ``builtin:bert-base`` and ``builtin:minilm-l6``.

Plain opset-17 ops only (Gather, MatMul, Add, Softmax, LayerNormalization, Erf) so that ONNX Runtime's
quantizer and TensorRT's parser take the graph as they take an exported Hugging Face model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import onnx

from accelbench.models.builtin._graph import BATCH_DIM, FLOAT, INT64, GraphBuilder, Tensor

# BERT's own initializer range; with post-LN it keeps every activation O(1).
_INIT_STD = 0.02
_LN_EPS = 1e-12


@dataclass(frozen=True)
class EncoderSpec:
    layers: int
    hidden: int
    heads: int
    ffn: int
    seq_len: int = 128
    vocab: int = 30522
    max_positions: int = 512
    type_vocab: int = 2
    # "bert": last_hidden_state + tanh pooler, token_type_ids input.
    # "sentence": token_embeddings + mean-pooled, L2-normalised sentence_embedding (sentence-transformers).
    head: str = "bert"


BERT_BASE = EncoderSpec(layers=12, hidden=768, heads=12, ffn=3072, head="bert")
MINILM_L6 = EncoderSpec(layers=6, hidden=384, heads=12, ffn=1536, head="sentence")


def build_encoder(name: str, spec: EncoderSpec, seed: int) -> onnx.ModelProto:
    g = GraphBuilder(seed)
    s, h = spec.seq_len, spec.hidden
    x = _embeddings(g, spec)
    mask_bias = _mask_bias(g)
    for _ in range(spec.layers):
        x = _layer(g, spec, x, mask_bias)
    token_shape: list[int | str] = [BATCH_DIM, s]
    inputs: list[Tensor] = [("input_ids", INT64, token_shape), ("attention_mask", INT64, token_shape)]
    outputs: list[Tensor]
    if spec.head == "bert":
        inputs.append(("token_type_ids", INT64, token_shape))
        g.op("Identity", [x], output="last_hidden_state")
        first = g.op("Gather", [x, g.const(np.array(0, np.int64))], axis=1)  # [CLS] token
        pooled = _linear(g, first, h, h)
        g.op("Tanh", [pooled], output="pooler_output")
        outputs = [("last_hidden_state", FLOAT, [BATCH_DIM, s, h]), ("pooler_output", FLOAT, [BATCH_DIM, h])]
    else:
        g.op("Identity", [x], output="token_embeddings")
        _mean_pool_normalise(g, x, output="sentence_embedding")
        outputs = [
            ("token_embeddings", FLOAT, [BATCH_DIM, s, h]),
            ("sentence_embedding", FLOAT, [BATCH_DIM, h]),
        ]
    return g.model(name, inputs, outputs)


def _embeddings(g: GraphBuilder, spec: EncoderSpec) -> str:
    h = spec.hidden
    words = g.op("Gather", [g.normal([spec.vocab, h], _INIT_STD, "word_embeddings"), "input_ids"])
    # Positions are fixed 0..seq_len-1 (static sequence length), gathered from the full 512-row table
    # so the parameter count matches the published model.
    pos_table = g.normal([spec.max_positions, h], _INIT_STD, "position_embeddings")
    positions = g.op("Gather", [pos_table, g.const(np.arange(spec.seq_len, dtype=np.int64))])
    type_table = g.normal([spec.type_vocab, h], _INIT_STD, "token_type_embeddings")
    if spec.head == "bert":
        types = g.op("Gather", [type_table, "token_type_ids"])
    else:
        # sentence-transformers exports take no token_type_ids; the model adds row 0 everywhere.
        types = g.op("Gather", [type_table, g.const(np.array(0, np.int64))])
    x = g.op("Add", [g.op("Add", [words, positions]), types])
    return _layer_norm(g, x, h)


def _mask_bias(g: GraphBuilder) -> str:
    """attention_mask [b, s] int64 → additive bias [b, 1, 1, s]: 0 where attended, -10000 where padded."""
    mask = g.op("Cast", ["attention_mask"], to=FLOAT)
    mask = g.op("Unsqueeze", [mask, g.const(np.array([1, 2], np.int64))])
    inverted = g.op("Sub", [g.const(np.array(1.0, np.float32)), mask])
    return g.op("Mul", [inverted, g.const(np.array(-10000.0, np.float32))])


def _linear(g: GraphBuilder, x: str, fan_in: int, fan_out: int) -> str:
    w = g.normal([fan_in, fan_out], _INIT_STD, "weight")
    return g.op("Add", [g.op("MatMul", [x, w]), g.zeros([fan_out], "bias")])


def _layer_norm(g: GraphBuilder, x: str, h: int) -> str:
    return g.op(
        "LayerNormalization", [x, g.ones([h], "ln_gamma"), g.zeros([h], "ln_beta")], axis=-1, epsilon=_LN_EPS
    )


def _heads(g: GraphBuilder, x: str, spec: EncoderSpec, perm: list[int]) -> str:
    head_dim = spec.hidden // spec.heads
    shaped = g.op("Reshape", [x, g.const(np.array([0, 0, spec.heads, head_dim], np.int64))])
    return g.op("Transpose", [shaped], perm=perm)


def _layer(g: GraphBuilder, spec: EncoderSpec, x: str, mask_bias: str) -> str:
    h = spec.hidden
    q = _heads(g, _linear(g, x, h, h), spec, [0, 2, 1, 3])  # [b, heads, s, d]
    k = _heads(g, _linear(g, x, h, h), spec, [0, 2, 3, 1])  # [b, heads, d, s]
    v = _heads(g, _linear(g, x, h, h), spec, [0, 2, 1, 3])
    scale = g.const(np.array(1.0 / math.sqrt(h // spec.heads), np.float32))
    scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), scale]), mask_bias])
    context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
    context = g.op("Transpose", [context], perm=[0, 2, 1, 3])
    context = g.op("Reshape", [context, g.const(np.array([0, 0, h], np.int64))])
    x = _layer_norm(g, g.op("Add", [_linear(g, context, h, h), x]), h)
    ffn = _gelu(g, _linear(g, x, h, spec.ffn))
    return _layer_norm(g, g.op("Add", [_linear(g, ffn, spec.ffn, h), x]), h)


def _gelu(g: GraphBuilder, x: str) -> str:
    """Exact GELU written out as 0.5·x·(1 + erf(x/√2)), the pattern exporters emit at opset 17."""
    erf = g.op("Erf", [g.op("Div", [x, g.const(np.array(math.sqrt(2.0), np.float32))])])
    one_plus = g.op("Add", [erf, g.const(np.array(1.0, np.float32))])
    return g.op("Mul", [g.op("Mul", [x, one_plus]), g.const(np.array(0.5, np.float32))])


def _mean_pool_normalise(g: GraphBuilder, x: str, output: str) -> str:
    """Masked mean over tokens then L2 normalisation, as sentence-transformers' Pooling + Normalize."""
    mask = g.op("Unsqueeze", [g.op("Cast", ["attention_mask"], to=FLOAT), g.const(np.array([-1], np.int64))])
    axis1 = g.const(np.array([1], np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask]), axis1], keepdims=0)
    counts = g.op("Max", [g.op("ReduceSum", [mask, axis1], keepdims=0), g.const(np.array(1e-9, np.float32))])
    mean = g.op("Div", [summed, counts])
    # At opset 17 only ReduceSum takes axes as an input; ReduceL2 still takes an attribute.
    norm = g.op("ReduceL2", [mean], axes=[-1], keepdims=1)
    norm = g.op("Max", [norm, g.const(np.array(1e-12, np.float32))])
    return g.op("Div", [mean, norm], output=output)
