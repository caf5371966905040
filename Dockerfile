# accelbench on NVIDIA Triton for a GPU host (L4, L40S, ...): the NGC image carries the onnxruntime
# (with the TensorRT execution provider), tensorrt and python backends that `--flavor ngc` repositories use.
# Pinned: 25.03-py3 = Triton 2.56, CUDA 12.8.1 (release notes), Ubuntu 24.04, Python 3.12
# (driver 560+, or R535/R545 on data-center GPUs through CUDA forward compatibility).
# Engines and TRT-EP caches are specific to this TensorRT version: build them in this same image.
ARG TRITON_TAG=25.03-py3
FROM nvcr.io/nvidia/tritonserver:${TRITON_TAG}

# Ubuntu 24.04's Python is externally managed (PEP 668): accelbench gets its own virtualenv
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-venv \
    && rm -rf /var/lib/apt/lists/*
RUN python3 -m venv /opt/accelbench
ENV PATH=/opt/accelbench/bin:${PATH}

WORKDIR /tmp/accelbench-src
COPY pyproject.toml README.md* ./
COPY accelbench ./accelbench
# onnxruntime-gpu replaces the CPU wheel (both provide the `onnxruntime` module; keep only the GPU one)
RUN pip install --no-cache-dir ".[gpu]" \
    && pip uninstall -y onnxruntime && pip install --no-cache-dir --force-reinstall --no-deps onnxruntime-gpu \
    && cd / && rm -rf /tmp/accelbench-src

RUN useradd --create-home --shell /bin/bash accelbench \
    && mkdir -p /models /results \
    && chown accelbench:accelbench /models /results
USER accelbench
WORKDIR /home/accelbench
ENV ACCELBENCH_CACHE_DIR=/home/accelbench/.cache/accelbench

# Inside the container Triton must listen on all interfaces so that `docker run -p` can reach it;
# publish the ports on the host's loopback only (see docs/serving.md).
EXPOSE 8000 8001 8002
CMD ["tritonserver", "--model-repository=/models", "--backend-directory=/opt/tritonserver/backends", \
     "--exit-timeout-secs=10", "--metrics-interval-ms=1000"]
