"""Run untrusted interpreter code: a fresh, kernel-confined process per program.

FIND's interpreters write Python that the benchmark must execute to score it; only this module
runs such code, never in the caller's process. Each pool slot is a fork server (``_worker.py``)
that forks one child per program, so nothing a program does survives it; ``random`` and
``numpy.random`` are seeded with ``seed`` in every child. A child's memory holds its own request
only, and the parent accepts exactly one framed, bounded, validated reply per program.

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

    from findbench.sandbox import Sandbox, run_functions

    res = run_functions(["def f(x):\\n    return 2 * x\\n"], [[1, 2, 3]])
    res[0].status, res[0].values   # ('ok', [2, 4, 6])

    with Sandbox(workers=2, timeout=5) as box:   # reuse the fork servers across calls
        box.run(codes, inputs, entry="function")
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import fcntl
import functools
import json
import logging
import math
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

__all__ = [
    "SandboxResult",
    "Sandbox",
    "run_functions",
    "STATUSES",
    "DEFAULT_TIMEOUT",
    "DEFAULT_CPU_SECONDS",
    "DEFAULT_MEMORY_MB",
    "DEFAULT_MAX_OUTPUT_BYTES",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_MAX_DISK_BYTES",
    "ALLOW_UNCONFINED_ENV",
    "SandboxUnavailableError",
    "short_reason",
    "REASON_CHARS",
]

logger = logging.getLogger(__name__)

STATUSES = ("ok", "error", "timeout", "killed")
DEFAULT_TIMEOUT = 10.0
DEFAULT_CPU_SECONDS = 5.0
DEFAULT_MEMORY_MB = 1024
DEFAULT_MAX_OUTPUT_BYTES = 64 * 1024
DEFAULT_MAX_RESULT_BYTES = 16 * 1024 * 1024
#: Bytes and files a program may write in all (its folder is a tmpfs of this size).
DEFAULT_MAX_DISK_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_FILES = 4096
#: Largest request (code and inputs, as JSON) of one program.
MAX_REQUEST_BYTES = 8 * 1024 * 1024
_DIR_PREFIX = "findbench-sandbox-"
# Deepest nesting of a value a reply may carry (the program side refuses deeper results).
_MAX_DEPTH = 64
_STARTUP_TIMEOUT = 120.0  # seconds for a worker to import numpy and report ready (shared CPUs)
# The fork server enforces each program's wall-clock limit itself; the parent only steps in
# (killing the whole server) when a reply is this much later than that.
_PARENT_SLACK = 30.0
#: Set to 1 to let the sandbox run code without a kernel boundary (no Landlock, no bwrap).
ALLOW_UNCONFINED_ENV = "FINDBENCH_ALLOW_UNCONFINED"
_MAX_ITEMS_PER_MESSAGE = 32
_F_SETPIPE_SZ, _F_GETPIPE_SZ = 1031, 1032  # fcntl: what a pipe holds before its writer blocks
_MESSAGE_LIMIT = 64 * 1024
from findbench._checks import integer, number, positive_int  # noqa: E402
from findbench.sandbox import _worker  # noqa: E402 - stdlib only; the parent reads its constants

_WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_worker.py")


@dataclasses.dataclass(frozen=True)
class SandboxResult:
    """What one program did.

    ``status``: ``"ok"`` (loaded; an exception on one input fails that input only, see
    ``errors``), ``"error"`` (could not be loaded: ``message`` says why), ``"timeout"`` (wall-clock
    or CPU limit) or ``"killed"`` (the worker died, oversized or malformed reply).
    ``values[i]`` is the JSON-plain result for ``inputs[i]`` (numpy becomes floats/lists, NaN/inf
    kept), ``None`` when ``errors[i]`` (``"ExcType: message"``) is set. ``stdout``: stdout and
    stderr, capped. ``isolation``: the layers that confined it.
    """

    status: str
    values: list
    errors: list
    stdout: str = ""
    message: str = ""
    isolation: str = ""

    @property
    def ok(self) -> bool:
        """True when the program loaded and no input raised."""
        return self.status == "ok" and all(e is None for e in self.errors)


class SandboxUnavailableError(RuntimeError):
    """A boundary is missing (Landlock or bwrap; seccomp or bwrap for file metadata) and the caller did not opt in."""


def _failed(status: str, n_inputs: int, message: str, stdout: str = "", isolation: str = "") -> SandboxResult:
    return SandboxResult(status, [None] * n_inputs, [message] * n_inputs, stdout, message, isolation)


#: Longest reason :func:`short_reason` gives.
REASON_CHARS = 200
_PROGRAM_DIR = re.compile(r"[^\s'\"]*" + re.escape(_DIR_PREFIX) + r"[^/\s'\"]*(?:/p\d+)?")


def short_reason(text: str, limit: int = REASON_CHARS) -> str:
    """A program's failure (a result's ``message`` or one of its ``errors``) as one short line for
    a user: the program's file name dropped (``invalid syntax (line 3)``), the host paths of
    findbench, its cache and the program's own folder replaced by ``<findbench>``,
    ``<findbench cache>`` and ``<program dir>``, control characters and runs of whitespace made
    one space, a bare ``MemoryError`` named as the memory limit, and at most ``limit`` characters."""
    import findbench

    text = str(text).replace("(<program>, line ", "(line ").replace('File "<program>", ', "")
    package, cache = _denied_paths()
    places = {package: "<findbench>", os.path.dirname(os.path.abspath(findbench.__file__)): "<findbench>",
              cache: "<findbench cache>", os.environ.get("FINDBENCH_CACHE", ""): "<findbench cache>"}
    for path in sorted((p for p in places if os.path.isabs(p) and len(p) > 1), key=len, reverse=True):
        text = text.replace(path, places[path])
    text = _PROGRAM_DIR.sub("<program dir>", text)
    text = " ".join(re.sub(r"[\x00-\x1f\x7f-\x9f]", " ", text).split())
    if text == "MemoryError":
        text = "MemoryError: the sandbox's memory limit was reached"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def isolation_level(isolation: dict) -> str:
    """The layers in a fork server's report joined by ``+`` (``"unconfined"`` without a kernel boundary)."""
    parts = [name for name, on in (
        ("bwrap", isolation.get("bwrap")),
        ("landlock", isolation.get("landlock")),
        ("seccomp", isolation.get("seccomp")),
        ("netns", isolation.get("network_namespace")),
        ("ipcns", isolation.get("ipc_namespace")),
        ("uid", isolation.get("uid", 0) != 0),
    ) if on]
    if not (isolation.get("bwrap") or isolation.get("landlock")):
        return "unconfined" + "".join(f"+{p}" for p in parts)
    return "+".join(parts)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def _check_entry(entry: Any, n: int) -> list[str]:
    """One validated entry per program (``entry`` is one string or one per program)."""
    entries = [entry] * n if isinstance(entry, str) else entry
    if isinstance(entries, (bytes, dict)) or not isinstance(entries, Sequence):
        raise TypeError(
            f"entry must be 'last_def', a function name or one of those per program, got {type(entry).__name__}"
        )
    if len(entries) != n:
        raise ValueError(f"entry must have one element per program ({len(entries)} != {n})")
    for k, e in enumerate(entries):
        where = "entry" if isinstance(entry, str) else f"entry[{k}]"
        if not isinstance(e, str):
            raise TypeError(f"{where} must be 'last_def' or a function name, got {type(e).__name__}")
        if e != "last_def" and not e.isidentifier():
            raise ValueError(f"{where} must be 'last_def' or a Python identifier, got {e!r}")
    return list(entries)


def _unavailable_message(iso: dict) -> str | None:
    """Why a fork server's layers leave programs a way out of the sandbox; ``None`` when they do not."""
    if not (iso.get("landlock") or iso.get("bwrap")):
        abi = iso.get("landlock_abi", 0)
        why = (
            "Landlock was switched off (landlock=False)"
            if abi and not iso.get("landlock")
            else "this kernel does not offer Landlock (Linux >= 5.13 built with CONFIG_SECURITY_LANDLOCK and "
            "'landlock' in the lsm= boot parameter)"
        )
        why = f"no kernel boundary for untrusted code: {why}, and bubblewrap is not in use (apt-get install bubblewrap"
    elif not iso.get("file_metadata_locked"):
        why = (
            "programs could change the mode, owner, times and extended attributes of files their uid owns: "
            "no seccomp filter, and bubblewrap is not in use (apt-get install libseccomp2 or bubblewrap"
        )
    else:
        return None
    return (
        f"{why}, or bwrap=None/True). To run model-written code without that boundary, "
        f"opt in with allow_unconfined=True or {ALLOW_UNCONFINED_ENV}=1."
    )


def _denied_paths() -> tuple[str, ...]:
    """What a program may never read even beneath a read-only root: findbench (its generators
    rebuild the ground truth) and its caches."""
    import findbench

    paths = [os.path.dirname(os.path.abspath(findbench.__file__))]
    cache = os.environ.get("FINDBENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "findbench")
    paths.append(cache)
    return tuple(os.path.realpath(p) for p in paths)


def _read_roots() -> list[str]:
    """The read-only paths programs need (the same list the fork server gives Landlock)."""
    from findbench.sandbox._worker import PROGRAM_PACKAGES
    from findbench.sandbox._worker import _read_roots as roots

    return roots(PROGRAM_PACKAGES, _denied_paths())


# Refused with EPERM (clone3 with ENOSYS, so the C library falls back to clone, whose flags a
# filter can read): the ways between programs or out of the sandbox the other layers leave open.
_SECCOMP_DENIED = (
    "keyctl",
    "add_key",
    "request_key",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "semget",
    "semop",
    "semtimedop",
    "semctl",
    "shmget",
    "shmat",
    "shmdt",
    "shmctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "userfaultfd",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "kcmp",
    "bpf",
    "perf_event_open",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "name_to_handle_at",
    "open_by_handle_at",
    "swapon",
    "swapoff",
    "reboot",
    "acct",
    "quotactl",
)
# Also refused with EPERM: every call that changes a file's mode, owner, times or extended
# attributes. Landlock leaves these to the file's owner, and a caller that is not root runs its
# programs as itself (the 32-bit names only exist on 32-bit hosts).
_SECCOMP_FILE_METADATA = (
    "chmod",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "chown",
    "fchown",
    "lchown",
    "fchownat",
    "chown32",
    "fchown32",
    "lchown32",
    "utime",
    "utimes",
    "utimensat",
    "futimesat",
    "utimensat_time64",
    "setxattr",
    "lsetxattr",
    "fsetxattr",
    "removexattr",
    "lremovexattr",
    "fremovexattr",
    "setxattrat",
    "removexattrat",
    "file_setattr",
)
# Numbers of the newest of them (shared by x86-64 and aarch64) for a libseccomp that predates them.
_NEW_SYSCALLS = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466, "file_setattr": 469}
# ioctl requests that set a file's inode flags or fsxattr (chattr): FS_IOC_SETFLAGS, its 32-bit
# form, FS_IOC_FSSETXATTR.
_IOCTL_FILE_ATTRIBUTES = (0x40086602, 0x40046602, 0x401C5820)
_CLONE_NAMESPACE_FLAGS = (
    0x00020000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
    0x00000080,
)  # NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET, NEWTIME


@functools.lru_cache(maxsize=1)
def seccomp_program() -> str | None:
    """The seccomp filter as base64 classic BPF (compiled by libseccomp through ``pyseccomp``);
    ``None`` and one warning without libseccomp (the sandbox then needs bwrap or an opt-in).
    Everything not listed is allowed."""
    import base64
    import errno
    import platform
    import socket

    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # no binding or no libseccomp.so.2
        logger.warning("sandbox: no seccomp filter (%s); install libseccomp2 and pyseccomp", exc)
        return None
    filt = sc.SyscallFilter(sc.ALLOW)
    for name in _SECCOMP_DENIED + _SECCOMP_FILE_METADATA:
        number = sc.resolve_syscall(sc.Arch.NATIVE, name)
        if number == -1 and platform.machine() in ("x86_64", "aarch64"):  # unknown to this libseccomp
            number = _NEW_SYSCALLS.get(name, -1)
        if number >= 0:  # negative: not a syscall of this architecture (or of this libseccomp)
            filt.add_rule(sc.ERRNO(errno.EPERM), number)
    for request in _IOCTL_FILE_ATTRIBUTES:
        filt.add_rule(sc.ERRNO(errno.EPERM), "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request))
    filt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in _CLONE_NAMESPACE_FLAGS:
        filt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    for name in ("socket", "socketpair"):
        filt.add_rule(sc.ERRNO(errno.EPERM), name, sc.Arg(0, sc.EQ, socket.AF_UNIX))
    with tempfile.TemporaryFile() as fh:
        filt.export_bpf(fh)
        fh.seek(0)
        return base64.b64encode(fh.read()).decode()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_stale_dirs() -> None:
    """Delete the folders of fork servers whose caller is gone (``kill -9`` leaves them);
    folder names carry the caller's pid: ``findbench-sandbox-<pid>-*``."""
    from findbench.sandbox._worker import rmtree

    base = tempfile.gettempdir()
    try:
        names = os.listdir(base)
    except OSError:
        return
    for name in names:
        parts = name.split("-")
        if name.startswith(_DIR_PREFIX) and len(parts) >= 4 and parts[2].isdigit():
            pid = int(parts[2])
            if pid != os.getpid() and not _pid_alive(pid):
                rmtree(os.path.join(base, name))


class _Worker:
    """One fork server and the parent's end of its pipes (protocol: see ``_worker.py``)."""

    def __init__(self, proc: subprocess.Popen, tmpdir: str, line_limit: int):
        self.proc = proc
        self.tmpdir = tmpdir
        self.line_limit = line_limit
        self.buf = bytearray()
        self.fd = proc.stdout.fileno()
        self.poller = select.poll()
        self.poller.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        try:  # a request pipe that holds a whole batch (Linux allows 1 MiB to anyone by default)
            fcntl.fcntl(proc.stdin.fileno(), _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass
        try:
            self.pipe_bytes = fcntl.fcntl(proc.stdin.fileno(), _F_GETPIPE_SZ)
        except OSError:  # pragma: no cover - not Linux
            self.pipe_bytes = 4096

    def read_line(self, deadline: float) -> bytes | None:
        """Next reply line; ``None`` on EOF; raises ``TimeoutError`` / ``OverflowError``."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[: nl + 1]
                return line
            if len(self.buf) > self.line_limit:
                raise OverflowError(f"worker reply longer than {self.line_limit} bytes")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if not self.poller.poll(max(1, math.ceil(remaining * 1000))):
                if time.monotonic() >= deadline:
                    raise TimeoutError
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk

    def read_frame(self, deadline: float) -> tuple[Any, bytes] | None:
        """The fork server's next ``(outcome, reply bytes)``; ``None`` on EOF; raises
        ``TimeoutError`` / ``OverflowError`` (``ValueError`` for a header it did not write)."""
        line = self.read_line(deadline)
        if line is None:
            return None
        header = json.loads(line)
        size = header["size"]
        if not isinstance(size, int) or not 0 <= size <= self.line_limit:
            raise OverflowError(f"worker reply of {size!r} bytes")
        while len(self.buf) < size:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            if not self.poller.poll(max(1, math.ceil(remaining * 1000))):
                continue
            chunk = os.read(self.fd, 1 << 20)
            if not chunk:
                return None
            self.buf += chunk
        body = bytes(self.buf[:size])
        del self.buf[:size]
        return header.get("outcome"), body

    def send(self, payloads: list[bytes]) -> None:
        self.proc.stdin.write(b"".join(len(p).to_bytes(4, "big") + p for p in payloads))
        self.proc.stdin.flush()

    def kill(self) -> int | None:
        if self.proc.poll() is None:
            try:
                self.proc.kill()
            except ProcessLookupError:  # pragma: no cover - raced with exit
                pass
        try:
            rc = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - unkillable process
            rc = None
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        from findbench.sandbox._worker import rmtree

        rmtree(self.tmpdir)
        return rc

    def close(self) -> None:
        """Ask the worker to exit (EOF on its request pipe), then make sure it did."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


class Sandbox:
    """A pool of reusable sandboxed fork servers (use as a context manager).

    Args:
        workers: fork servers, started on the first :meth:`run`; default ``min(4, os.cpu_count())``.
        timeout: wall-clock seconds per program (loading it and all its inputs).
        cpu_seconds: ``RLIMIT_CPU`` per program (1 s granularity upward).
        memory_mb: address-space limit in MiB (includes ~100-200 MiB of interpreter and numpy).
        max_output_bytes: characters of stdout+stderr kept per program.
        max_result_bytes: largest serialized result of one program (larger: status ``"error"``).
        drop_privileges: when root, run programs as uid/gid 65534 (``nobody``).
        max_file_bytes: ``RLIMIT_FSIZE`` of a program.
        max_disk_bytes, max_files: size of the program's tmpfs; ``isolation["disk_cap_bytes"]``
            is ``None`` where no mount namespace could be made.
        bwrap: run the fork servers in bubblewrap: ``None`` when installed, ``True`` required.
        allow_unconfined: run where a boundary is missing (no Landlock and no bwrap, or no seccomp
            and no bwrap); default ``$FINDBENCH_ALLOW_UNCONFINED``.
    """

    def __init__(
        self,
        *,
        workers: int | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        cpu_seconds: float = DEFAULT_CPU_SECONDS,
        memory_mb: int = DEFAULT_MEMORY_MB,
        max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        seed: int = 0,
        isolate_network: bool = True,
        drop_privileges: bool = True,
        max_file_bytes: int = 16 * 1024 * 1024,
        max_disk_bytes: int = DEFAULT_MAX_DISK_BYTES,
        max_files: int = DEFAULT_MAX_FILES,
        landlock: bool = True,
        bwrap: bool | None = None,
        allow_unconfined: bool | None = None,
    ):
        if workers is None:
            workers = max(1, min(4, os.cpu_count() or 1))
        for name, value in (
            ("workers", workers),
            ("memory_mb", memory_mb),
            ("max_output_bytes", max_output_bytes),
            ("max_result_bytes", max_result_bytes),
            ("max_file_bytes", max_file_bytes),
            ("max_disk_bytes", max_disk_bytes),
            ("max_files", max_files),
        ):
            positive_int(name, value)
        for name, value in (("timeout", timeout), ("cpu_seconds", cpu_seconds)):
            if number(name, value) <= 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        integer("seed", seed, 0)
        for name, value in (
            ("landlock", landlock),
            ("isolate_network", isolate_network),
            ("drop_privileges", drop_privileges),
        ):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
        for name, value in (("bwrap", bwrap), ("allow_unconfined", allow_unconfined)):
            if value is not None and not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool or None, got {type(value).__name__}")
        bwrap_path = shutil.which("bwrap") if bwrap is not False else None
        if bwrap is True and bwrap_path is None:
            raise SandboxUnavailableError("bwrap=True but bubblewrap is not installed (apt-get install bubblewrap)")
        self._bwrap = bwrap_path
        self.allow_unconfined = _env_flag(ALLOW_UNCONFINED_ENV) if allow_unconfined is None else allow_unconfined
        self.n_workers = int(workers)
        self.timeout = float(timeout)
        self.config = {
            "cpu_seconds": float(cpu_seconds),
            "memory_mb": int(memory_mb),
            "max_output_bytes": int(max_output_bytes),
            "max_result_bytes": int(max_result_bytes),
            "max_file_bytes": int(max_file_bytes),
            "max_disk_bytes": int(max_disk_bytes),
            "max_files": int(max_files),
            "max_request_bytes": MAX_REQUEST_BYTES,
            "seed": int(seed),
            "isolate_network": bool(isolate_network),
            "drop_privileges": bool(drop_privileges and os.geteuid() == 0),
            "timeout": float(timeout),
            "landlock": bool(landlock),
            "bwrap": bool(bwrap_path),
            "seccomp_bpf": seccomp_program(),
            "packages": list(_worker.PROGRAM_PACKAGES),
            "deny": list(_denied_paths()),
            # Tests switch the audit hook off to show that the kernel layers hold alone.
            "audit_hook": True,
        }
        self._line_limit = int(max_result_bytes) + 8 * int(max_output_bytes) + _MESSAGE_LIMIT
        self._workers: list[_Worker | None] = [None] * self.n_workers
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()
        # Workers die with their parent (PR_SET_PDEATHSIG follows the *thread* that forked
        # them), so every worker is started from this one long-lived thread.
        self._spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="findbench-sandbox")
        self._closed = False
        #: What the fork servers applied (filled when the first one starts).
        self.isolation: dict = {}

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        """Stop all workers and remove their temporary directories."""
        if self._closed:
            return
        self._closed = True
        for i, worker in enumerate(self._workers):
            if worker is not None:
                worker.close()
                self._workers[i] = None
        self._spawner.shutdown(wait=True)

    @property
    def isolation_level(self) -> str:
        """The layers in force, e.g. ``"landlock+netns+uid"`` (``""`` before the first run)."""
        return isolation_level(self.isolation) if self.isolation else ""

    def _command(self, config: dict) -> list[str]:
        command = [sys.executable, "-s", "-P", _WORKER_SCRIPT, "--worker", json.dumps(config)]
        if not self._bwrap:
            return command
        # bubblewrap: a mount namespace showing only what programs may read, the server's folder and /dev.
        binds: list[str] = []
        for path in _read_roots() + [os.path.realpath(_WORKER_SCRIPT)]:
            binds += ["--ro-bind", path, path]
        # The interpreter by the name it is started with, and a virtual environment's marker
        # (so the server finds numpy where the caller does); nothing else of the environment.
        binds += ["--ro-bind", os.path.realpath(sys.executable), sys.executable]
        venv_cfg = os.path.join(sys.prefix, "pyvenv.cfg")
        if os.path.exists(venv_cfg):
            binds += ["--ro-bind", venv_cfg, venv_cfg]
        for link in ("/lib", "/lib64", "/bin", "/usr/lib64"):  # merged-/usr systems: the ELF loader's path
            if os.path.islink(link):
                binds += ["--symlink", os.readlink(link), link]
        return [
            self._bwrap,
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            *(["--unshare-net"] if config["isolate_network"] else []),
            *binds,
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            config["tmpdir"],
            config["tmpdir"],
            "--chdir",
            config["tmpdir"],
            "--",
            *command,
        ]

    def _popen(self) -> _Worker:
        _clean_stale_dirs()
        tmpdir = tempfile.mkdtemp(prefix=f"{_DIR_PREFIX}{os.getpid()}-")
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": tmpdir,
            "TMPDIR": tmpdir,
            "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "NUMEXPR_NUM_THREADS": "1",
        }
        config = dict(self.config, tmpdir=tmpdir)
        proc = subprocess.Popen(
            self._command(config),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tmpdir,
            env=env,
            start_new_session=True,
        )
        return _Worker(proc, tmpdir, self._line_limit)

    def _start_worker(self) -> _Worker:
        if self._closed:
            raise RuntimeError("the Sandbox is closed")
        worker = self._spawner.submit(self._popen).result()
        try:
            line = worker.read_line(time.monotonic() + _STARTUP_TIMEOUT)
        except (TimeoutError, OverflowError):
            line = None
        hello = json.loads(line) if line else {}
        if not hello.get("ready"):
            rc = worker.kill()
            raise RuntimeError(f"sandbox worker failed to start (exit code {rc}): {hello.get('error', '')}")
        iso = dict(hello.get("isolation", {}))
        refusal = None if self.allow_unconfined else _unavailable_message(iso)
        if refusal:
            worker.kill()
            raise SandboxUnavailableError(refusal)
        with self._lock:
            if not self.isolation:
                self.isolation = iso
                logger.debug("sandbox isolation: %s (%s)", isolation_level(iso), iso)
        return worker

    def run(
        self,
        codes: Sequence[str],
        inputs: Sequence[Sequence[Any]],
        *,
        entry: str | Sequence[str] = "last_def",
        progress: bool = False,
    ) -> list[SandboxResult]:
        """Run every program ``codes[k]`` on its JSON inputs ``inputs[k]``; one result per program.

        ``entry="last_def"`` calls each program's last top-level ``def`` (FIND's rule); any other
        value names the function (or one entry per program). Each input is the single argument,
        passed as data. Programs run as ``__name__ == "__findbench_program__"`` (so ``__main__``
        demo blocks are skipped).
        """
        if isinstance(codes, (str, bytes)) or not isinstance(codes, Sequence):
            raise TypeError(f"codes must be a sequence of strings, got {type(codes).__name__}")
        if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
            raise TypeError(f"inputs must be a sequence of input lists, got {type(inputs).__name__}")
        if len(codes) != len(inputs):
            raise ValueError(f"codes and inputs must have the same length ({len(codes)} != {len(inputs)})")
        entries = _check_entry(entry, len(codes))
        items = []
        results: list[SandboxResult | None] = [None] * len(codes)
        for k, (code, args) in enumerate(zip(codes, inputs)):
            if not isinstance(code, str):
                raise TypeError(f"codes[{k}] must be a string, got {type(code).__name__}")
            if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
                raise TypeError(f"inputs[{k}] must be a list of inputs, got {type(args).__name__}")
            args = list(args)
            try:
                json.dumps(args, allow_nan=True)
            except (TypeError, ValueError) as exc:
                raise TypeError(f"inputs[{k}] must be JSON data (numbers, strings, lists, dicts): {exc}") from None
            item = {"k": k, "code": code, "inputs": args, "entry": entries[k]}
            payload = json.dumps(item, separators=(",", ":"), allow_nan=True).encode("utf-8", "surrogatepass")
            if len(payload) > MAX_REQUEST_BYTES:  # this program's error, not the batch's
                results[k] = _failed("error", len(args), f"the program with its inputs is {len(payload):,} bytes as "
                                     f"JSON, over the sandbox's {MAX_REQUEST_BYTES:,}-byte request cap",
                                     isolation=self.isolation_level)
                continue
            item["payload"] = payload
            items.append(item)
        if self._closed:
            raise RuntimeError("the Sandbox is closed")
        if not items:
            return results  # type: ignore[return-value]
        from tqdm.auto import tqdm  # noqa: PLC0415

        n_threads = min(self.n_workers, len(items))
        per_message = max(1, min(_MAX_ITEMS_PER_MESSAGE, len(items) // (4 * n_threads)))
        queue = deque(items)
        bar = tqdm(total=len(items), desc="sandbox", unit="program", disable=not progress)
        errors: list[BaseException] = []

        def take() -> list[dict]:
            with self._lock:
                batch = []
                size = 0
                while queue and len(batch) < per_message and size < (1 << 20):
                    item = queue.popleft()
                    size += len(item["payload"])
                    batch.append(item)
                return batch

        def give_back(batch: list[dict]) -> None:
            with self._lock:
                queue.extendleft(reversed(batch))

        def loop(slot: int) -> None:
            try:
                while True:
                    batch = take()
                    if not batch:
                        return
                    done = self._run_batch(slot, batch, results)
                    bar.update(done)
                    if done < len(batch):
                        give_back(batch[done:])
            except BaseException as exc:  # surfaced in the caller's thread below
                errors.append(exc)

        with self._run_lock:
            try:
                if n_threads == 1:
                    loop(0)
                else:
                    threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(n_threads)]
                    for t in threads:
                        t.start()
                    for t in threads:
                        t.join()
            finally:
                bar.close()
        if errors:
            raise errors[0]
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:  # pragma: no cover - every path above fills its items
            raise RuntimeError(f"sandbox lost programs {missing[:5]}")
        return results  # type: ignore[return-value]

    def _run_batch(self, slot: int, batch: list[dict], results: list) -> int:
        """Send ``batch`` to worker ``slot``; fill ``results``; return how many items finished."""
        worker = self._workers[slot]
        if worker is None or worker.proc.poll() is not None:
            if worker is not None:
                worker.kill()
            worker = self._workers[slot] = self._start_worker()
        # Send only what the request pipe holds at once (at least one item): the fork server
        # reads one request at a time and writes each reply before the next, so a parent still
        # blocked writing requests would never read those replies. The caller sends the rest.
        size, fit = len(batch[0]["payload"]) + 4, 1
        while fit < len(batch) and size + len(batch[fit]["payload"]) + 4 <= worker.pipe_bytes:
            size += len(batch[fit]["payload"]) + 4
            fit += 1
        batch = batch[:fit]
        payloads = [item["payload"] for item in batch]
        try:
            worker.send(payloads)
        except OSError:  # the idle worker died between batches: no program is to blame
            worker.kill()
            worker = self._workers[slot] = self._start_worker()
            worker.send(payloads)
        level = self.isolation_level
        started = time.monotonic()
        for done, item in enumerate(batch):
            n_inputs = len(item["inputs"])
            try:
                frame = worker.read_frame(started + self.timeout + _PARENT_SLACK)
            except TimeoutError:
                worker.kill()
                self._workers[slot] = None
                results[item["k"]] = _failed(
                    "timeout", n_inputs, f"wall-clock limit of {self.timeout:g} s exceeded", isolation=level
                )
                return done + 1
            except (OverflowError, ValueError, KeyError, TypeError) as exc:
                worker.kill()
                self._workers[slot] = None
                results[item["k"]] = _failed("killed", n_inputs, f"worker protocol broken: {exc}", isolation=level)
                return done + 1
            if frame is None:  # the fork server itself died: not the program's doing as a rule
                rc = worker.kill()
                self._workers[slot] = None
                results[item["k"]] = self._death_result(rc, n_inputs)
                return done + 1
            started = time.monotonic()
            outcome, body = frame
            if outcome:
                results[item["k"]] = _failed(str(outcome[0]), n_inputs, str(outcome[1]), isolation=level)
            else:
                results[item["k"]] = self._parse_reply(body, item, level)
        return len(batch)

    def _death_result(self, rc: int | None, n_inputs: int) -> SandboxResult:
        if rc is not None and rc == -signal.SIGXCPU:
            return _failed(
                "timeout",
                n_inputs,
                f"CPU time limit of {self.config['cpu_seconds']:g} s exceeded",
                isolation=self.isolation_level,
            )
        if rc is not None and rc < 0:
            try:
                name = signal.Signals(-rc).name
            except ValueError:
                name = str(-rc)
            return _failed("killed", n_inputs, f"worker killed by signal {name}", isolation=self.isolation_level)
        return _failed(
            "killed", n_inputs, f"worker exited unexpectedly (exit code {rc})", isolation=self.isolation_level
        )

    @staticmethod
    def _parse_reply(body: bytes, item: dict, level: str) -> SandboxResult:
        """The program's reply if it is exactly one JSON line of the expected shape for this item;
        anything else fails this item only and never raises."""
        n_inputs = len(item["inputs"])
        try:
            if body.count(b"\n") != 1 or not body.endswith(b"\n"):
                raise ValueError("not exactly one reply line")
            reply = json.loads(body)
            if not isinstance(reply, dict) or not _shallow(reply):
                raise ValueError("not a reply")
            status, values, errors = reply.get("status"), reply.get("values"), reply.get("errors")
            stdout, message = reply.get("stdout", ""), reply.get("message", "")
            if (
                reply.get("k") != item["k"]
                or status not in STATUSES
                or not isinstance(values, list)
                or not isinstance(errors, list)
                or len(values) != n_inputs
                or len(errors) != n_inputs
                or not isinstance(stdout, str)
                or not isinstance(message, str)
                or not all(e is None or isinstance(e, str) for e in errors)
            ):
                raise ValueError("malformed reply")
        except Exception:  # noqa: BLE001 - RecursionError, MemoryError, UnicodeDecodeError, ...
            return _failed("killed", n_inputs, "the program's process sent a malformed reply", isolation=level)
        return SandboxResult(status, values, errors, stdout, message, level)


def _shallow(value: Any, limit: int = _MAX_DEPTH) -> bool:
    """Whether ``value`` nests at most ``limit`` levels (iterative: any depth is safe to check)."""
    stack = [(value, 0)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (list, dict)):
            if depth >= limit:
                return False
            stack.extend((x, depth + 1) for x in (v.values() if isinstance(v, dict) else v))
    return True


def run_functions(
    codes: Sequence[str],
    inputs: Sequence[Sequence[Any]],
    *,
    entry: str | Sequence[str] = "last_def",
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
    cpu_seconds: float = DEFAULT_CPU_SECONDS,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    workers: int | None = None,
    seed: int = 0,
    progress: bool = False,
    sandbox: Sandbox | None = None,
    allow_unconfined: bool | None = None,
) -> list[SandboxResult]:
    """Run each program on its inputs (see :meth:`Sandbox.run`); one :class:`SandboxResult` each.

    ``sandbox=`` reuses a running :class:`Sandbox` (its limits apply, the ones here are ignored);
    otherwise a pool with these limits runs for this call only.
    """
    if sandbox is not None:
        if not isinstance(sandbox, Sandbox):
            raise TypeError(f"sandbox must be a findbench.sandbox.Sandbox, got {type(sandbox).__name__}")
        return sandbox.run(codes, inputs, entry=entry, progress=progress)
    if workers is None and hasattr(codes, "__len__"):
        workers = max(1, min(4, os.cpu_count() or 1, len(codes) or 1))
    with Sandbox(
        workers=workers,
        timeout=timeout,
        cpu_seconds=cpu_seconds,
        memory_mb=memory_mb,
        max_output_bytes=max_output_bytes,
        seed=seed,
        allow_unconfined=allow_unconfined,
    ) as box:
        return box.run(codes, inputs, entry=entry, progress=progress)
