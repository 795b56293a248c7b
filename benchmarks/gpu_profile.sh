#!/usr/bin/env bash
# Throughput profile on a machine with an NVIDIA GPU, in under 10 minutes (never run by the tests).
#
# Serves the embedded model (as "embedded") and the shipped judge's LoRA adapter (as
# "embedded-evaluator") with vLLM for CUDA, then runs benchmarks/profile.py at larger sizes with
# the models in process (on the GPU) and on that server with 1 and 8 requests in flight. Writes
# benchmarks/results/profile-gpu.json and profile-gpu.md (and the server's log beside them).
#
#     bash benchmarks/gpu_profile.sh                       # needs `pip install vllm` (CUDA) in PATH's Python
#     VLLM=/opt/vllm/bin/vllm PYTHON=.venv/bin/python PORT=8011 bash benchmarks/gpu_profile.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
VLLM=${VLLM:-vllm}
PORT=${PORT:-8011}
RESULTS=benchmarks/results
if ! command -v "$VLLM" >/dev/null; then
    echo "gpu_profile.sh: no vLLM command '$VLLM' (pip install vllm, or set VLLM=...)" >&2
    exit 2
fi
"$PYTHON" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    || { echo "gpu_profile.sh: torch in $PYTHON sees no CUDA GPU" >&2; exit 2; }

BASE=$("$PYTHON" -c "from findbench.models import resolve; print(resolve('embedded'))")
read -r -a LORA <<< "$("$PYTHON" -c "from findbench.lm.vllm_server import lora_args
from findbench.models import resolve
print(' '.join(lora_args(resolve('embedded-evaluator'), 'embedded-evaluator')))")"
mkdir -p "$RESULTS"
"$VLLM" serve "$BASE" --served-model-name embedded --dtype float32 --max-model-len 2048 \
    --host 127.0.0.1 --port "$PORT" "${LORA[@]}" > "$RESULTS/profile-gpu-server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null; wait "$SERVER" 2>/dev/null || true' EXIT
URL="http://127.0.0.1:$PORT/v1"
for _ in $(seq 150); do
    curl -sf "$URL/models" >/dev/null && break
    if ! kill -0 "$SERVER" 2>/dev/null; then
        echo "gpu_profile.sh: vLLM exited; see $RESULTS/profile-gpu-server.log" >&2
        exit 1
    fi
    sleep 2
done
curl -sf "$URL/models" >/dev/null || { echo "gpu_profile.sh: vLLM not ready after 300 s" >&2; exit 1; }

"$PYTHON" benchmarks/profile.py --url "$URL" --server-label gpu --functions 8 --rounds 3 --latents 32 \
    --device cuda --total-tokens 100000 --unit-tests 100 --out "$RESULTS/profile-gpu.json" --card "$RESULTS/profile-gpu.md"
