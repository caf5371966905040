"""Run a torch model on fixed batch buckets: the torch-cuda flavor's execution engine.

A dynamic batch of n rows is padded to the smallest bucket >= n (chunked by the largest bucket when n is
larger) and copied into that bucket's static input buffers; the bucket then runs as a CUDA-graph replay
(``cuda_graphs``: one launch per batch, no Python per op), as a ``torch.compile``d function (``compile``), or
plainly (``eager``, no buckets). Static buffers are what make CUDA graphs possible: a graph replays on the
memory it was captured with. On a CPU the ``cuda_graphs`` mode keeps the same buffers and padding and runs the
model on them without capture, so the bucket logic is exercised by the CPU tests.

This file is copied next to the generated ``model.py``; the python-backend stub imports it from there with
the server's python, so it imports nothing from accelbench.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

MODES = ("cuda_graphs", "compile", "eager")
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class _Bucket:
    """Static input buffers of one batch size and the step that runs the model on them."""

    def __init__(
        self,
        size: int,
        inputs: dict[str, torch.Tensor],
        step: Callable[[], list[torch.Tensor]],
        captured: bool = False,
    ) -> None:
        self.size, self.inputs, self.step, self.captured = size, inputs, step, captured


class BucketRunner:
    """``fn(feeds) -> [outputs]`` on ``device``; ``run`` takes CPU or device tensors batched on dim 0.

    ``static_dims``: the non-batch dims of every input (None: shapes unknown, so only eager is possible);
    ``input_dtypes``: each input's dtype as the server sends it (floats run in ``dtype``).
    """

    def __init__(
        self,
        fn: Callable[[dict[str, torch.Tensor]], list[torch.Tensor]],
        *,
        static_dims: dict[str, tuple[int, ...]] | None,
        input_dtypes: dict[str, torch.dtype],
        buckets: list[int],
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
        mode: str = "cuda_graphs",
        warmup: int = 2,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"torch_mode {mode!r}: expected one of {', '.join(MODES)}")
        self.fn, self.device, self.dtype, self.warmup = fn, torch.device(device), dtype, warmup
        self.mode = mode if static_dims is not None and buckets else "eager"
        self.static_dims = static_dims or {}
        self.input_dtypes = input_dtypes
        self.buckets: list[_Bucket] = []
        self.notes: list[str] = []
        if self.mode != mode:
            self.notes.append(f"{mode} needs static input shapes and batch buckets: running eager")
        if self.mode != "eager":
            self._prepare(sorted(set(buckets)))

    # -- set-up --------------------------------------------------------------------------------------
    def _buffer_dtype(self, name: str) -> torch.dtype:
        dtype = self.input_dtypes[name]
        return self.dtype if dtype.is_floating_point else dtype

    def _prepare(self, sizes: list[int]) -> None:
        step_fn = self.fn
        if self.mode == "compile":
            # one compiled graph per bucket shape; dynamic=False so each bucket is specialised, not guarded
            step_fn = torch.compile(self.fn, dynamic=False)
        for size in sizes:
            inputs = {
                name: torch.zeros((size, *dims), dtype=self._buffer_dtype(name), device=self.device)
                for name, dims in self.static_dims.items()
            }
            if self.mode == "cuda_graphs" and self.device.type == "cuda":
                bucket = _Bucket(size, inputs, self._capture(inputs), captured=True)
            else:
                bucket = _Bucket(size, inputs, (lambda f, i: lambda: f(i))(step_fn, inputs))
                if self.mode == "compile":  # compile every bucket now, not on the first request
                    for _ in range(max(self.warmup, 1)):
                        bucket.step()
            self.buckets.append(bucket)
        if self.mode == "cuda_graphs" and self.device.type != "cuda":
            self.notes.append("cuda_graphs on a CPU: static buckets and padding, no graph capture")

    def _capture(self, inputs: dict[str, torch.Tensor]) -> Callable[[], list[torch.Tensor]]:
        """Warm up on a side stream (as torch.cuda.graphs requires), capture once, return replay → outputs."""
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(max(self.warmup, 1)):
                self.fn(inputs)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs = self.fn(inputs)

        def replay() -> list[torch.Tensor]:
            graph.replay()
            return outputs

        return replay

    # -- running -------------------------------------------------------------------------------------
    def to_device(self, feeds: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {
            name: t.to(self.device, self.dtype if t.is_floating_point() else t.dtype, non_blocking=True)
            for name, t in feeds.items()
        }

    def fits(self, feeds: dict[str, torch.Tensor]) -> bool:
        """True when every input has the static non-batch shape (then a bucket can take it)."""
        return bool(self.buckets) and all(
            tuple(t.shape[1:]) == tuple(self.static_dims.get(name, ())) and name in self.static_dims
            for name, t in feeds.items()
        )

    def bucket_for(self, rows: int) -> _Bucket:
        return next((b for b in self.buckets if b.size >= rows), self.buckets[-1])

    @torch.no_grad()
    def run(self, feeds: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """Outputs for a batch: fresh tensors on the device, batch dim first."""
        feeds = self.to_device(feeds)
        if self.mode == "eager" or not self.fits(feeds):
            return list(self.fn(feeds))
        rows = next(iter(feeds.values())).shape[0]
        largest = self.buckets[-1].size
        parts: list[list[torch.Tensor]] = []
        for start in range(0, rows, largest):
            count = min(largest, rows - start)
            bucket = self.bucket_for(count)
            for name, buffer in bucket.inputs.items():
                buffer[:count].copy_(feeds[name][start : start + count])
                if count < bucket.size:
                    buffer[count:].zero_()  # padding rows: zeros, discarded below
            parts.append([out[:count].clone() for out in bucket.step()])
        if len(parts) == 1:
            return parts[0]
        return [torch.cat(chunk) for chunk in zip(*parts, strict=True)]
