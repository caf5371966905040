#!/usr/bin/env bash
# One prepared run on the lent H200: the bundled tritonserver serving bert-base and resnet50 through the
# torch-cuda flavor (fp16, CUDA graphs per batch bucket, DLPack), `accelbench loadtest` with several Locust
# processes sweeping concurrency, NVML board power sampled beside it -> J/request. docs/serving.md says how.
#
#   here:    bash bench/device/prepare_carry.sh                      # fills .whl/ (about 50 MiB)
#   device:  run(command="bash bench/device/h200_triton.sh", carry=[".whl"], timeout_s=420)
#   rerun:   MODELS=resnet50 bash bench/device/h200_triton.sh        # one model, about half the time
#   also the gpu-marked tests (about a minute more):  GPU_TESTS=1 bash bench/device/h200_triton.sh
#   rehearse here, no GPU:  OUT=/tmp/h200 DEVICE=cpu bash bench/device/h200_triton.sh
#     (tests/test_device_triton.py does, with short steps and lengths and the suite's cache: CACHE=...)
#   only the generative part:  MODELS= bash bench/device/h200_triton.sh   (LLM_MODELS= skips it)
#
# Writes to $OUT (at most 8 files come back): log.txt, probe.json, power.csv, summary.json, summary.md,
# results.tar.gz (result documents, server logs, variant manifests). A failing model is logged and the next
# one still runs; the script stops starting new work past BUDGET_S seconds.
set -uo pipefail
OUT=${OUT:?set OUT to the folder for the results}
DEVICE=${DEVICE:-cuda}
if [[ $DEVICE == cuda ]]; then
    MODELS=${MODELS:-bert-base resnet50} TARGET=${TARGET:-h200-sxm} PRECISION=${PRECISION:-fp16}
    CONCURRENCY=${CONCURRENCY:-1,8,32,128} DURATION=${DURATION:-} PROCESSES=${PROCESSES:-8}
    SETS=${SETS:-}
    # generative: llama-tiny and a 1 B config whose decode is memory-bound (2 GB of bf16 weights a step)
    LLM_MODELS=${LLM_MODELS-llama-tiny llama-1b} LLM_PRECISION=${LLM_PRECISION:-bf16}
    LLM_CONCURRENCY=${LLM_CONCURRENCY:-1,8,32,64} LLM_SETS=${LLM_SETS:-}
else  # the same flow on this CPU: small model, device=cpu float32, short steps
    MODELS=${MODELS:-identity} TARGET=${TARGET:-cpu-local} PRECISION=${PRECISION:-fp32}
    CONCURRENCY=${CONCURRENCY:-1,4} DURATION=${DURATION:-3} PROCESSES=${PROCESSES:-2}
    SETS=${SETS:---set device=cpu --set dtype=float32 --set instance_count=1 --set max_batch_size=8}
    LLM_MODELS=${LLM_MODELS-llama-tiny} LLM_PRECISION=${LLM_PRECISION:-fp32}
    LLM_CONCURRENCY=${LLM_CONCURRENCY:-1,4} LLM_SETS=${LLM_SETS:---set device=cpu --set dtype=float32}
fi
LLM_ISL=${LLM_ISL:-128} LLM_OSL=${LLM_OSL:-64}
# each step runs until stable, at most MAX_DURATION s (DURATION: at least that long, then until stable, at most
# MAX_DURATION when it is set, else the loadtest's own limit)
WARMUP=${WARMUP:-2} BUDGET_S=${BUDGET_S:-330}
if [[ -n $DURATION ]]; then
    STEP=(--duration "$DURATION" ${MAX_DURATION:+--max-duration "$MAX_DURATION"})
else
    STEP=(--max-duration "${MAX_DURATION:-15}")
fi
ROOT=$(pwd) WORK=${WORK:-/tmp/h200-triton}
# accelbench's cache (built models, the server's backends copy): fresh under WORK unless CACHE names one
CACHE=${CACHE:-$WORK/cache}
START=$(date +%s)
mkdir -p "$OUT" && rm -rf "$WORK" && mkdir -p "$WORK"/{variants,results,logs}
log() { echo "[$(date -u +%H:%M:%S) +$(( $(date +%s) - START ))s] $*" | tee -a "$OUT/log.txt"; }
over_budget() { (( $(date +%s) - START > BUDGET_S )); }

# 1. the carried wheels: the slim nvidia-pytriton (tritonserver) and the load-test packages, beside the
#    device's own torch/onnx/numpy 2 (the stub only ever sees torch tensors through DLPack)
PY=${PYTHON:-python3}
[[ $DEVICE == cuda ]] && CARRIED=${CARRIED-.whl} || CARRIED=${CARRIED-}  # a CPU rehearsal uses this venv
if [[ -n $CARRIED ]] && ls "$CARRIED"/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" \
        "$CARRIED"/*.whl >>"$OUT/log.txt" 2>&1 || { log "wheel install failed"; exit 1; }
    export PYTHONPATH="$WORK/site:$ROOT"
else
    export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
export PATH="$(dirname "$(command -v "$PY")"):$PATH" ACCELBENCH_CACHE_DIR="$CACHE" PYTHONUNBUFFERED=1
# the generative models' tokenizer files, carried without the 90 MB wheel they come from (prepare_carry.sh)
[[ -n $CARRIED && -f $CARRIED/tokenizer/tokenizer.json ]] && export ACCELBENCH_MINILM_TOKENIZER="$ROOT/$CARRIED/tokenizer"
AB=("$PY" -m accelbench.cli)
log "python $("$PY" -V 2>&1) at $(command -v "$PY"); device=$DEVICE models=[$MODELS] target=$TARGET"

# 2. preflight: torch sees the GPU; the 3.12 stub finds a libpython (else add the interpreter's LIBDIR)
"$PY" bench/device/preflight.py --device "$DEVICE" >>"$OUT/log.txt" 2>&1 || { log "preflight failed"; tail -5 "$OUT/log.txt"; exit 1; }
extra_lib=$("$PY" bench/device/preflight.py --libpython-dir 2>/dev/null || true)
[[ -n $extra_lib ]] && export LD_LIBRARY_PATH="$extra_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" && log "LD_LIBRARY_PATH += $extra_lib"
"${AB[@]}" probe --json >"$OUT/probe.json" 2>>"$OUT/log.txt" || log "probe failed (exit $?)"

# 3. NVML board power for the whole run (nothing to sample on a CPU rehearsal; the summary says so)
"$PY" bench/device/nvml_energy.py sample --out "$OUT/power.csv" >>"$OUT/log.txt" 2>&1 &
SAMPLER=$!
trap 'kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null' EXIT

# results packed after every model too, so a run cut off at its time limit still returns what it finished
pack() {
    local docs=("$WORK"/results/*.json)
    if [[ -e ${docs[0]} ]]; then
        "$PY" bench/device/triton_summary.py "${docs[@]}" --out "$OUT" >>"$OUT/log.txt" 2>&1 || log "summary failed"
    fi
    tar -czf "$OUT/results.tar.gz" -C "$WORK" results logs
}

# 4. per model: variant, torch-cuda repository, load test through the product's own path
for model in $MODELS; do
    if over_budget; then log "budget of ${BUDGET_S}s spent: $model not started"; continue; fi
    variant="${model}__${TARGET}__${PRECISION}"
    log "$model: quantize"
    "${AB[@]}" quantize "builtin:$model" --target "$TARGET" --precision "$PRECISION" --out "$WORK/variants" \
        >>"$OUT/log.txt" 2>&1 || { log "$model: quantize failed"; continue; }
    # shellcheck disable=SC2086  # SETS is a list of --set KEY=VALUE words
    "${AB[@]}" repository "$WORK/variants/$variant" --out "$WORK/repo-$model" --flavor torch-cuda $SETS \
        >>"$OUT/log.txt" 2>&1 || { log "$model: repository failed"; continue; }
    log "$model: loadtest concurrency $CONCURRENCY, steps ${STEP[*]}, $PROCESSES Locust processes"
    "${AB[@]}" loadtest "$WORK/repo-$model" --model "$variant" --manifest "$WORK/variants/$variant" \
        --concurrency "$CONCURRENCY" "${STEP[@]}" --warmup "$WARMUP" --processes "$PROCESSES" \
        --out "$WORK/results" --server-log "$WORK/logs/server-$model.log" >>"$OUT/log.txt" 2>&1 \
        || log "$model: loadtest exit $?"
    grep -h "torch .* on \|CUDA graphs\|failed\|rror" "$WORK/logs/server-$model.log" 2>/dev/null | tail -4 >>"$OUT/log.txt"
    cp "$WORK/variants/$variant/manifest.json" "$WORK/logs/manifest-$variant.json" 2>/dev/null
    pack
done

# 4b. generative models: the decoupled Triton model (torch on the device, in-flight batching) swept by the
#     streaming load generator over generate_stream; TTFT, ITL, TPOT and tokens/s per step
for model in $LLM_MODELS; do
    if over_budget; then log "budget of ${BUDGET_S}s spent: $model not started"; continue; fi
    variant="${model}__${TARGET}__${LLM_PRECISION}"
    log "$model: quantize ($LLM_PRECISION)"
    "${AB[@]}" quantize "builtin:$model" --target "$TARGET" --precision "$LLM_PRECISION" --out "$WORK/variants" \
        >>"$OUT/log.txt" 2>&1 || { log "$model: quantize failed"; continue; }
    # shellcheck disable=SC2086  # LLM_SETS is a list of --set KEY=VALUE words
    "${AB[@]}" repository "$WORK/variants/$variant" --out "$WORK/repo-$model" --flavor torch-cuda $LLM_SETS \
        >>"$OUT/log.txt" 2>&1 || { log "$model: repository failed"; continue; }
    log "$model: streaming loadtest concurrency $LLM_CONCURRENCY, ISL $LLM_ISL / OSL $LLM_OSL"
    "${AB[@]}" loadtest "$WORK/repo-$model" --model "$variant" --manifest "$WORK/variants/$variant" \
        --api triton --isl "$LLM_ISL" --osl "$LLM_OSL" --concurrency "$LLM_CONCURRENCY" "${STEP[@]}" \
        --warmup "$WARMUP" --out "$WORK/results" --server-log "$WORK/logs/server-$model.log" \
        >>"$OUT/log.txt" 2>&1 || log "$model: loadtest exit $?"
    cp "$WORK/variants/$variant/manifest.json" "$WORK/logs/manifest-$variant.json" 2>/dev/null
    llm_docs=("$WORK"/results/"$variant"*.json)
    [[ -e ${llm_docs[0]} ]] && "$PY" bench/device/llm_summary.py "${llm_docs[@]}" --out "$OUT" >>"$OUT/log.txt" 2>&1
    pack
done

# optional: the gpu-marked tests (torch-cuda flavor with device=cuda, bf16, CUDA graphs; the device check)
if [[ ${GPU_TESTS:-0} == 1 ]] && ! over_budget; then
    log "gpu-marked tests"
    "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/test_serving_torch.py tests/test_device_check.py \
        >>"$OUT/log.txt" 2>&1 || log "gpu tests exit $?"
fi

# 5. power -> J/request per step, then everything packed into the files that come back
kill "$SAMPLER" 2>/dev/null; wait "$SAMPLER" 2>/dev/null; trap - EXIT
docs=("$WORK"/results/*.json)
if [[ -e ${docs[0]} ]]; then
    if [[ -s $OUT/power.csv ]]; then
        "$PY" bench/device/nvml_energy.py attach --power "$OUT/power.csv" "${docs[@]}" >>"$OUT/log.txt" 2>&1
    else
        log "no NVML samples: no J/request"
    fi
fi
pack
log "done: $(ls "$WORK"/results | wc -l) result documents"
