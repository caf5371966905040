"""A small ONNX-graph interpreter on torch tensors, so the built-in models run on a GPU in FP16/BF16.

Why not onnxruntime-gpu: the GPU machine has no package registry and the CPU build of onnxruntime;
why not onnx2torch: another dependency to carry. The built-in models use ~30 plain ONNX ops, and an
interpreter over them is short. Floating-point weights and activations take the compute dtype; integer
tensors (token ids, shapes) stay int64. Shape arithmetic stays on the CPU as small int64 tensors so that
the whole forward pass can be captured in a CUDA graph (no host syncs during replay).

Only the ops the built-in models need are implemented; an unknown op raises NotImplementedError naming it.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

_OPS: dict[str, Callable] = {}


def _op(*names: str):
    def register(fn):
        for name in names:
            _OPS[name] = fn
        return fn

    return register


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _ints(t) -> list[int]:
    """A shape-like operand as python ints (they live on the CPU, so this never syncs the GPU)."""
    return [int(v) for v in t.reshape(-1).tolist()]


def _same_device(a, b):
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.device != b.device:
        if a.device.type == "cpu":
            a = a.to(b.device)
        else:
            b = b.to(a.device)
    return a, b


def _binary(fn):
    def run(ctx, node, a, b):
        a, b = _same_device(a, b)
        return fn(a, b)

    return run


for _name, _fn in {
    "Add": torch.add,
    "Sub": torch.sub,
    "Mul": torch.mul,
    "Pow": torch.pow,
    "Equal": torch.eq,
    "Less": torch.lt,
    "Greater": torch.gt,
    "Max": torch.maximum,
    "Min": torch.minimum,
}.items():
    _OPS[_name] = _binary(_fn)


@_op("Div")
def _div(ctx, node, a, b):
    a, b = _same_device(a, b)
    if not a.is_floating_point() and not b.is_floating_point():
        return torch.div(a, b, rounding_mode="trunc")
    return a / b


@_op("MatMul")
def _matmul(ctx, node, a, b):
    return torch.matmul(a, b)


@_op("Gemm")
def _gemm(ctx, node, a, b, c=None):
    at = _attrs(node)
    if at.get("transA", 0):
        a = a.transpose(-1, -2)
    if at.get("transB", 0):
        b = b.transpose(-1, -2)
    y = at.get("alpha", 1.0) * (a @ b)
    if c is not None:
        y = y + at.get("beta", 1.0) * c
    return y


for _name, _fn in {
    "Relu": torch.relu,
    "Erf": torch.erf,
    "Sqrt": torch.sqrt,
    "Tanh": torch.tanh,
    "Sigmoid": torch.sigmoid,
    "Neg": torch.neg,
    "Exp": torch.exp,
    "Not": torch.logical_not,
    "Reciprocal": torch.reciprocal,
    "Identity": lambda x: x,
}.items():
    _OPS[_name] = (lambda f: lambda ctx, node, x: f(x))(_fn)


@_op("Softmax")
def _softmax(ctx, node, x):
    return torch.softmax(x, dim=_attrs(node).get("axis", -1))


@_op("LayerNormalization")
def _layernorm(ctx, node, x, scale, bias=None):
    at = _attrs(node)
    axis = at.get("axis", -1)
    shape = x.shape[axis:] if axis >= 0 else x.shape[axis:]
    return F.layer_norm(x, tuple(shape), scale, bias, at.get("epsilon", 1e-5))


@_op("Gelu")
def _gelu(ctx, node, x):
    return F.gelu(x, approximate="tanh" if _attrs(node).get("approximate", "none") == "tanh" else "none")


@_op("Gather")
def _gather(ctx, node, data, idx):
    axis = _attrs(node).get("axis", 0)
    if idx.dim() == 0 and idx.device.type == "cpu":  # a constant index: no copy to the device (graph capture)
        return data.select(axis, int(idx))
    if idx.device != data.device:
        idx = idx.to(data.device)
    return torch.index_select(data, axis, idx.reshape(-1)).reshape(
        data.shape[:axis] + idx.shape + data.shape[axis + 1 :]
    )


@_op("Shape")
def _shape(ctx, node, x):
    at = _attrs(node)
    dims = list(x.shape)[at.get("start", 0) : at.get("end", None)]
    return torch.tensor(dims, dtype=torch.int64)


@_op("Reshape")
def _reshape(ctx, node, x, shape):
    dims = _ints(shape)
    dims = [x.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return x.reshape(dims)


@_op("Transpose")
def _transpose(ctx, node, x):
    perm = _attrs(node).get("perm") or list(reversed(range(x.dim())))
    return x.permute(*perm)


@_op("Unsqueeze")
def _unsqueeze(ctx, node, x, axes=None):
    axes = _ints(axes) if axes is not None else list(_attrs(node)["axes"])
    out_rank = x.dim() + len(axes)
    for a in sorted(a % out_rank for a in axes):
        x = x.unsqueeze(a)
    return x


@_op("Squeeze")
def _squeeze(ctx, node, x, axes=None):
    axes = _ints(axes) if axes is not None else list(_attrs(node).get("axes", []))
    if not axes:
        return x.squeeze()
    for a in sorted((a % x.dim() for a in axes), reverse=True):
        x = x.squeeze(a)
    return x


@_op("Concat")
def _concat(ctx, node, *xs):
    dev = next((x.device for x in xs if x.device.type != "cpu"), xs[0].device)
    return torch.cat([x.to(dev) for x in xs], dim=_attrs(node)["axis"])


@_op("Slice")
def _slice(ctx, node, x, starts, ends, axes=None, steps=None):
    starts, ends = _ints(starts), _ints(ends)
    axes = _ints(axes) if axes is not None else list(range(len(starts)))
    steps = _ints(steps) if steps is not None else [1] * len(starts)
    index = [slice(None)] * x.dim()
    for s, e, a, st in zip(starts, ends, axes, steps, strict=True):
        size = x.shape[a]
        e = min(e, size) if e >= 0 else max(e + size, 0)
        index[a] = slice(s if s >= 0 else s + size, e, st)
    return x[tuple(index)]


@_op("Cast")
def _cast(ctx, node, x):
    to = _attrs(node)["to"]
    if to in (
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.FLOAT16,
        onnx.TensorProto.BFLOAT16,
        onnx.TensorProto.DOUBLE,
    ):
        return x.to(ctx.dtype)
    return x.to(
        {
            onnx.TensorProto.INT64: torch.int64,
            onnx.TensorProto.INT32: torch.int32,
            onnx.TensorProto.BOOL: torch.bool,
        }[to]
    )


@_op("Constant")
def _constant(ctx, node):
    return ctx.tensor(numpy_helper.to_array(_attrs(node)["value"]))


@_op("ConstantOfShape")
def _constant_of_shape(ctx, node, shape):
    at = _attrs(node)
    value = numpy_helper.to_array(at["value"]) if "value" in at else np.zeros(1, np.float32)
    return torch.full(
        _ints(shape), value.reshape(-1)[0].item(), dtype=ctx.tensor(value).dtype, device=ctx.device
    )


@_op("Expand")
def _expand(ctx, node, x, shape):
    return (
        x * torch.ones(_ints(shape), dtype=x.dtype, device=x.device)
        if x.dim() == 0
        else x.expand(*torch.broadcast_shapes(x.shape, tuple(_ints(shape))))
    )


@_op("Where")
def _where(ctx, node, cond, a, b):
    a, b = _same_device(a, b)
    return torch.where(cond.to(a.device), a, b)


def _reduce(fn):
    def run(ctx, node, x, axes=None):
        at = _attrs(node)
        axes = _ints(axes) if axes is not None else at.get("axes")
        keep = bool(at.get("keepdims", 1))
        if not axes:
            return fn(x, dim=tuple(range(x.dim())), keepdim=keep)
        return fn(x, dim=tuple(axes), keepdim=keep)

    return run


_OPS["ReduceMean"] = _reduce(torch.mean)
_OPS["ReduceSum"] = _reduce(torch.sum)
_OPS["ReduceMax"] = _reduce(torch.amax)
_OPS["ReduceL2"] = _reduce(lambda x, dim, keepdim: torch.sqrt(torch.sum(x * x, dim=dim, keepdim=keepdim)))


@_op("Clip")
def _clip(ctx, node, x, lo=None, hi=None):
    return torch.clamp(x, None if lo is None else lo.item(), None if hi is None else hi.item())


@_op("Conv")
def _conv(ctx, node, x, w, b=None):
    at = _attrs(node)
    pads = at.get("pads", [0, 0, 0, 0])
    if pads[0] != pads[2] or pads[1] != pads[3]:
        x = F.pad(x, (pads[1], pads[3], pads[0], pads[2]))
        pads = [0, 0, 0, 0]
    return F.conv2d(
        x,
        w,
        b,
        stride=tuple(at.get("strides", [1, 1])),
        padding=(pads[0], pads[1]),
        dilation=tuple(at.get("dilations", [1, 1])),
        groups=at.get("group", 1),
    )


@_op("MaxPool")
def _maxpool(ctx, node, x):
    at = _attrs(node)
    pads = at.get("pads", [0, 0, 0, 0])
    if pads[0] != pads[2] or pads[1] != pads[3]:
        x = F.pad(x, (pads[1], pads[3], pads[0], pads[2]), value=-math.inf)
        pads = [0, 0, 0, 0]
    return F.max_pool2d(x, tuple(at["kernel_shape"]), tuple(at.get("strides", [1, 1])), (pads[0], pads[1]))


@_op("GlobalAveragePool")
def _gap(ctx, node, x):
    return x.mean(dim=(2, 3), keepdim=True)


@_op("Flatten")
def _flatten(ctx, node, x):
    axis = _attrs(node).get("axis", 1)
    return x.reshape(math.prod(x.shape[:axis]), -1)


@_op("BatchNormalization")
def _batchnorm(ctx, node, x, scale, bias, mean, var):
    return F.batch_norm(x, mean, var, scale, bias, False, 0.0, _attrs(node).get("epsilon", 1e-5))


@_op("LpNormalization")
def _lpnorm(ctx, node, x):
    at = _attrs(node)
    return F.normalize(x, p=at.get("p", 2), dim=at.get("axis", -1))


def topological(nodes, available: set[str]) -> list[onnx.NodeProto]:
    """The nodes in an order where each runs after its inputs exist. ONNX asks for that order, but
    onnxruntime's float16 converter appends its input casts at the end of the list (onnxruntime sorts itself)."""
    ready, pending, order = set(available) | {""}, list(nodes), []
    while pending:
        runnable = [n for n in pending if all(name in ready for name in n.input)]
        if not runnable:
            names = sorted({name for n in pending for name in n.input} - ready)[:5]
            raise ValueError(f"the ONNX graph uses values nothing produces: {', '.join(names)}")
        for node in runnable:
            order.append(node)
            ready.update(node.output)
        keep = {id(n) for n in runnable}
        pending = [n for n in pending if id(n) not in keep]
    return order


class OnnxTorch:
    """Runs an ONNX ModelProto with torch on ``device`` in ``dtype`` (float tensors only)."""

    def __init__(self, model: onnx.ModelProto, device: str = "cpu", dtype: torch.dtype = torch.float32):
        self.device, self.dtype = torch.device(device), dtype
        self.graph = model.graph
        missing = sorted({n.op_type for n in self.graph.node} - set(_OPS))
        if missing:
            raise NotImplementedError(
                f"ONNX ops not supported by the torch interpreter: {', '.join(missing)}"
            )
        self.weights = {t.name: self.tensor(numpy_helper.to_array(t)) for t in self.graph.initializer}
        self.input_names = [i.name for i in self.graph.input if i.name not in self.weights]
        self.output_names = [o.name for o in self.graph.output]
        self.nodes = topological(self.graph.node, set(self.weights) | set(self.input_names))

    def tensor(self, array: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.array(array, copy=True))
        if t.is_floating_point():
            return t.to(self.device, self.dtype)
        # Small integer constants are shape arithmetic: keep them on the CPU (no device syncs).
        return t if t.numel() <= 16 else t.to(self.device)

    @torch.no_grad()
    def __call__(self, feeds: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        env = dict(self.weights)
        env.update(feeds)
        for node in self.nodes:
            args = [env[name] if name else None for name in node.input]
            while args and args[-1] is None:
                args.pop()
            out = _OPS[node.op_type](self, node, *args)
            env[node.output[0]] = out
        return [env[name] for name in self.output_names]

    def feeds(self, arrays: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        """numpy inputs → device tensors (floats in the compute dtype, integers as int64)."""
        return {
            k: torch.from_numpy(np.ascontiguousarray(v)).to(self.device)
            if not np.issubdtype(v.dtype, np.floating)
            else torch.from_numpy(v).to(self.device, self.dtype)
            for k, v in arrays.items()
        }
