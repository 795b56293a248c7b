# `make main` and `make test` each do all set-up first (idempotent).
.PHONY: setup main test bench

setup: .venv/.findbench-setup

.venv/.findbench-setup: pyproject.toml scripts/setup.sh
	bash scripts/setup.sh

main: setup
	.venv/bin/findbench main

test: setup
	.venv/bin/python -m pytest -q

bench: setup
	.venv/bin/python benchmarks/run_all.py
