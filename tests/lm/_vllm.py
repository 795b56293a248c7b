"""The tests' vLLM server: one way for a test module to start it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import pytest

from findbench.lm.vllm_server import find_vllm_python, serve_vllm

START_TIMEOUT = 600  # seconds; ~40 s on an idle machine, minutes on a busy 2-core one


def served_vllm(model_dir, tmp_path_factory, name: str, extra_args: Sequence[str] = ()) -> Iterator[str]:
    """Yield the URL of `vllm serve` on ``model_dir`` (``.venv-vllm``; skipped without it) until the
    fixture ends; a server that does not start fails the test with its reason."""
    try:
        python = find_vllm_python()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    log_path = tmp_path_factory.mktemp(name) / "server.log"
    with contextlib.ExitStack() as stack:
        try:
            url = stack.enter_context(serve_vllm(model_dir, python=python, log_path=log_path,
                                                 start_timeout=START_TIMEOUT, extra_args=list(extra_args)))
        except (RuntimeError, TimeoutError) as exc:
            pytest.fail(str(exc))
        yield url
