"""ResNet-50 v1.5 (stride 2 in the 3×3 conv of each down-sampling bottleneck) for ``builtin:resnet50``.

BatchNorm is folded into each convolution's bias, as TensorRT and ORT do at build time, so the graph is
Conv/Relu/Add/MaxPool/GlobalAveragePool/Flatten/Gemm only.
"""

from __future__ import annotations

import math

import onnx

from accelbench.models.builtin._graph import BATCH_DIM, FLOAT, GraphBuilder

STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (bottleneck width, blocks, first stride)
EXPANSION = 4
NUM_CLASSES = 1000
IMAGE_SIZE = 224
# Scales the last conv of each residual branch down (a mild "zero-init residual"): without BatchNorm
# statistics the sum of 16 He-initialised branches would grow activations ~2x per block.
_RESIDUAL_SCALE = 0.2


def _conv(g: GraphBuilder, x: str, c_in: int, c_out: int, k: int, stride: int, gain: float = 1.0) -> str:
    std = gain * math.sqrt(2.0 / (c_in * k * k))  # He init
    w = g.normal([c_out, c_in, k, k], std, "conv_weight")
    b = g.zeros([c_out], "conv_bias")
    pad = k // 2
    return g.op("Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4)


def _bottleneck(g: GraphBuilder, x: str, c_in: int, width: int, stride: int) -> str:
    c_out = width * EXPANSION
    y = g.op("Relu", [_conv(g, x, c_in, width, 1, 1)])
    y = g.op("Relu", [_conv(g, y, width, width, 3, stride)])  # v1.5: the stride lives here
    y = _conv(g, y, width, c_out, 1, 1, gain=_RESIDUAL_SCALE)
    shortcut = x if (stride == 1 and c_in == c_out) else _conv(g, x, c_in, c_out, 1, stride)
    return g.op("Relu", [g.op("Add", [y, shortcut])])


def build_resnet50(name: str, seed: int) -> onnx.ModelProto:
    return build_resnet(name, seed, tuple(blocks for _width, blocks, _stride in STAGES))


def build_resnet(name: str, seed: int, blocks_per_stage: tuple[int, ...]) -> onnx.ModelProto:
    """ResNet v1.5 with ``blocks_per_stage`` bottlenecks in each of the four stages ((3, 4, 6, 3) is ResNet-50)."""
    g = GraphBuilder(seed)
    x = g.op("Relu", [_conv(g, "input", 3, 64, 7, 2)])
    x = g.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = 64
    for (width, _blocks, first_stride), blocks in zip(STAGES, blocks_per_stage, strict=True):
        for i in range(blocks):
            x = _bottleneck(g, x, c_in, width, first_stride if i == 0 else 1)
            c_in = width * EXPANSION
    x = g.op("Flatten", [g.op("GlobalAveragePool", [x])], axis=1)
    fc_w = g.normal([NUM_CLASSES, c_in], 1.0 / math.sqrt(c_in), "fc_weight")
    g.op("Gemm", [x, fc_w, g.zeros([NUM_CLASSES], "fc_bias")], output="logits", transB=1)
    return g.model(
        name,
        [("input", FLOAT, [BATCH_DIM, 3, IMAGE_SIZE, IMAGE_SIZE])],
        [("logits", FLOAT, [BATCH_DIM, NUM_CLASSES])],
    )
