"""Run untrusted interpreter code: a fresh, kernel-confined process per program.

FIND's interpreters write Python that the benchmark must execute to score it; only this module
runs such code, never in the caller's process. Each pool slot is a fork server (``_worker.py``)
that forks one child per program, so nothing a program does survives it; ``random`` and
``numpy.random`` are seeded with ``seed`` in every child. A child's memory holds its own request
only, and the parent accepts exactly one framed, bounded, validated reply per program. This
module is the façade: :mod:`.policy` holds the limits and what confines a program,
:mod:`.pool` the fork servers and their wire protocol, ``_worker.py`` the fork server itself.

Layers, applied in the child before any untrusted byte runs: Landlock (read-only access to the
interpreter, stdlib, shared libraries and ``PROGRAM_PACKAGES``; read-write to the program's own
size-capped tmpfs; no TCP; ABI >= 6: scoped signals and abstract sockets), a seccomp filter,
fresh network/IPC/mount namespaces, ``PR_SET_NO_NEW_PRIVS``, uid ``nobody`` when root, a
parent-death signal, rlimits, and bubblewrap around the fork server where ``bwrap`` is installed.
An audit hook gives readable refusals; the kernel layers hold without it. Limits: wall-clock and
CPU time per program (status ``"timeout"`` / ``"killed"``), output capped at
``max_output_bytes``, results over ``max_result_bytes`` refused.

:attr:`Sandbox.isolation_level` (and ``SandboxResult.isolation``) names the layers in force,
e.g. ``"landlock+seccomp+netns+ipcns+uid"``. Without a kernel boundary (no Landlock, no bwrap;
level ``"unconfined"``), or with nothing that keeps programs from changing the mode, owner, times
or extended attributes of files (no seccomp filter, no bwrap; ``isolation["file_metadata_locked"]``),
the sandbox refuses to run unless ``allow_unconfined=True`` or ``FINDBENCH_ALLOW_UNCONFINED=1``.

Example::

    from findbench.sandbox import Sandbox, SandboxLimits, run_functions

    res = run_functions(["def f(x):\\n    return 2 * x\\n"], [[1, 2, 3]])
    res[0].status, res[0].values   # ('ok', [2, 4, 6])

    with Sandbox(SandboxLimits(workers=2, timeout=5)) as box:   # reuse the fork servers across calls
        box.run(codes, inputs, entry="function")
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Sequence
from typing import Any

from findbench._checks import instance
from findbench.sandbox.policy import (
    ALLOW_UNCONFINED_ENV,
    DEFAULT_CPU_SECONDS,
    DEFAULT_MAX_DISK_BYTES,
    DEFAULT_MAX_OUTPUT_BYTES,
    DEFAULT_MAX_RESULT_BYTES,
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT,
    DIR_PREFIX,
    MAX_REQUEST_BYTES,
    SandboxLimits,
    SandboxUnavailableError,
    denied_paths,
    seccomp_program,
)
from findbench.sandbox.pool import STATUSES, Sandbox, SandboxResult

__all__ = [
    "SandboxResult",
    "SandboxLimits",
    "Sandbox",
    "run_functions",
    "STATUSES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_CPU_SECONDS",
    "DEFAULT_MEMORY_MB",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MAX_DISK_BYTES",
    "MAX_REQUEST_BYTES",
    "ALLOW_UNCONFINED_ENV",
    "SandboxUnavailableError",
    "seccomp_program",
    "short_reason",
    "REASON_CHARS",
]

#: Longest reason :func:`short_reason` gives.
REASON_CHARS = 200
_PROGRAM_DIR = re.compile(r"[^\s'\"]*" + re.escape(DIR_PREFIX) + r"[^/\s'\"]*(?:/p\d+)?")


def short_reason(text: str, limit: int = REASON_CHARS) -> str:
    """A program's failure (a result's ``message`` or one of its ``errors``) as one short line for
    a user: the program's file name dropped (``invalid syntax (line 3)``), the host paths of
    findbench, its cache and the program's own folder replaced by ``<findbench>``,
    ``<findbench cache>`` and ``<program dir>``, control characters and runs of whitespace made
    one space, a bare ``MemoryError`` named as the memory limit, and at most ``limit`` characters."""
    import findbench

    text = str(text).replace("(<program>, line ", "(line ").replace('File "<program>", ', "")
    package, cache = denied_paths()
    places = {package: "<findbench>", os.path.dirname(os.path.abspath(findbench.__file__)): "<findbench>",
              cache: "<findbench cache>", os.environ.get("FINDBENCH_CACHE", ""): "<findbench cache>"}
    for path in sorted((p for p in places if os.path.isabs(p) and len(p) > 1), key=len, reverse=True):
        text = text.replace(path, places[path])
    text = _PROGRAM_DIR.sub("<program dir>", text)
    text = " ".join(re.sub(r"[\x00-\x1f\x7f-\x9f]", " ", text).split())
    if text == "MemoryError":
        text = "MemoryError: the sandbox's memory limit was reached"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def run_functions(
    codes: Sequence[str],
    inputs: Sequence[Sequence[Any]],
    *,
    entry: str | Sequence[str] = "last_def",
    limits: SandboxLimits | None = None,
    seed: int = 0,
    progress: bool = False,
    sandbox: Sandbox | None = None,
    allow_unconfined: bool | None = None,
) -> list[SandboxResult]:
    """Run each program on its inputs (see :meth:`Sandbox.run`); one :class:`SandboxResult` each.

    ``sandbox=`` reuses a running :class:`Sandbox` (its limits apply, the ones here are ignored);
    otherwise a pool with ``limits`` runs for this call only, with no more workers than programs.
    """
    if sandbox is not None:
        return instance("sandbox", sandbox, Sandbox, "a findbench.sandbox.Sandbox").run(
            codes, inputs, entry=entry, progress=progress)
    limits = limits or SandboxLimits()
    if limits.workers is None and hasattr(codes, "__len__"):
        limits = dataclasses.replace(limits, workers=max(1, min(4, os.cpu_count() or 1, len(codes) or 1)))
    with Sandbox(limits, seed=seed, allow_unconfined=allow_unconfined) as box:
        return box.run(codes, inputs, entry=entry, progress=progress)
