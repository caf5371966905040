"""A tiny ONNX graph builder: named weights from one seeded generator, nodes with fresh output names."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
# IR 8 is the one opset 17 shipped with; older TensorRT parsers reject newer IR versions.
IR_VERSION = 8
BATCH_DIM = "batch"
Tensor = tuple[str, int, Sequence[int | str]]  # a graph input or output: name, element type, shape


class GraphBuilder:
    """Accumulates nodes and initializers; every weight comes from ``self.rng`` in build order."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counter = 0

    def _fresh(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}_{self._counter}"

    def const(self, array: np.ndarray, prefix: str = "const") -> str:
        name = self._fresh(prefix)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def normal(self, shape: Sequence[int], std: float, prefix: str) -> str:
        return self.const(self.rng.normal(0.0, std, size=tuple(shape)).astype(np.float32), prefix)

    def zeros(self, shape: Sequence[int], prefix: str) -> str:
        return self.const(np.zeros(tuple(shape), np.float32), prefix)

    def ones(self, shape: Sequence[int], prefix: str) -> str:
        return self.const(np.ones(tuple(shape), np.float32), prefix)

    def op(self, op_type: str, inputs: Sequence[str], output: str | None = None, **attrs) -> str:
        out = output or self._fresh(op_type.lower())
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], name=self._fresh(op_type), **attrs))
        return out

    def model(
        self,
        name: str,
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
    ) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in inputs],
            [helper.make_tensor_value_info(n, t, list(s)) for n, t, s in outputs],
            initializer=self.initializers,
        )
        model = helper.make_model(
            graph,
            opset_imports=[helper.make_opsetid("", OPSET)],
            producer_name="accelbench",
            doc_string=f"accelbench built-in model {name}; random weights from a fixed seed",
        )
        model.ir_version = IR_VERSION
        return model


FLOAT = TensorProto.FLOAT
INT64 = TensorProto.INT64
