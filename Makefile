# `make main` and `make test` each do all set-up first (idempotent).
.PHONY: setup setup-vllm main lint test bench

setup: .venv/.findbench-setup

.venv/.findbench-setup: pyproject.toml scripts/setup.sh scripts/prepare_models.py
	bash scripts/setup.sh

main: setup
	.venv/bin/findbench main

# vLLM (CPU build) in its own venv: the HTTP LM backend is tested against a real server.
setup-vllm: .venv-vllm/.findbench-vllm-setup

.venv-vllm/.findbench-vllm-setup: scripts/setup_vllm.sh
	bash scripts/setup_vllm.sh

# Lint first: ruff, and import-linter's layers / no-cycles contracts (pyproject.toml).
lint: setup
	.venv/bin/ruff check .
	.venv/bin/lint-imports

test: setup setup-vllm lint
	.venv/bin/python -m pytest -q

bench: setup
	.venv/bin/python benchmarks/run_all.py
