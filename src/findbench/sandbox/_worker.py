"""Worker process of :mod:`findbench.sandbox` (run as ``python -I findbench/sandbox/_worker.py --worker CONFIG``).

Kept apart from ``sandbox.py`` so that the worker imports nothing it does not need (in
particular not ``subprocess``) before isolating itself.  The protocol: one JSON line
``{"ready": true, "isolation": {...}}`` after set-up, then for every request line
``{"items": [{"k", "code", "inputs", "entry"}, ...]}`` one reply line per item
``{"k", "status", "values", "errors", "stdout", "message"}``.
"""

from __future__ import annotations

import _thread
import json
import math
import os
import shutil
import signal
import sys
from typing import Any

_PRELOAD = (
    "numpy", "numpy.random", "numpy.linalg", "math", "cmath", "random", "re", "string",
    "itertools", "functools", "collections", "statistics", "operator", "decimal", "fractions",
    "json", "copy", "bisect", "heapq", "unicodedata", "textwrap", "datetime", "warnings",
)
# ``__name__`` of a program: not "__main__", so demo code under ``if __name__ == "__main__":``
# that interpreters like to append does not run.
PROGRAM_NAME = "__findbench_program__"
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000
_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38


class _CappedText:
    """A write-only text stream that keeps the first ``cap`` characters."""

    def __init__(self, cap: int):
        self.cap = cap
        self.parts: list[str] = []
        self.kept = 0
        self.dropped = 0

    def write(self, s: Any) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        room = self.cap - self.kept
        if room > 0:
            part = s[:room]
            self.parts.append(part)
            self.kept += len(part)
            self.dropped += len(s) - len(part)
        else:
            self.dropped += len(s)
        return len(s)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def text(self) -> str:
        out = "".join(self.parts)
        if self.dropped:
            out += f"\n[... {self.dropped} characters dropped]"
        return out


def _libc_call(name: str, *args: int) -> int:
    import ctypes  # noqa: PLC0415

    libc = ctypes.CDLL(None, use_errno=True)
    rc = getattr(libc, name)(*[ctypes.c_ulong(a) for a in args])
    return 0 if rc == 0 else ctypes.get_errno() or -1


def _worker_setup(config: dict) -> dict:
    """Isolate this process; return what was achieved."""
    import resource  # noqa: PLC0415

    iso: dict = {"audit_hook": True}
    # Die with the parent; never gain privileges through exec.
    _libc_call("prctl", _PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    _libc_call("prctl", _PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    # Network namespace (before numpy: unshare(CLONE_NEWUSER) needs a single thread).
    iso["network_namespace"] = False
    if config["isolate_network"]:
        if _libc_call("unshare", _CLONE_NEWNET) == 0:
            iso["network_namespace"] = True
        elif _libc_call("unshare", _CLONE_NEWUSER | _CLONE_NEWNET) == 0:
            iso["network_namespace"] = True
    for name in _PRELOAD:
        __import__(name)
    tmpdir = config["tmpdir"]
    os.chdir(tmpdir)
    if config["drop_privileges"] and os.geteuid() == 0:
        try:
            os.chown(tmpdir, 65534, 65534)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
        except OSError as exc:  # keep going with the other layers
            iso["drop_privileges_error"] = _describe(exc)
    iso["uid"] = os.geteuid()
    mem = config["memory_mb"] * 1024 * 1024
    limits = {
        "RLIMIT_AS": (mem, mem),
        "RLIMIT_FSIZE": (config["max_file_bytes"], config["max_file_bytes"]),
        "RLIMIT_CORE": (0, 0),
        "RLIMIT_NOFILE": (64, 64),
        "RLIMIT_NPROC": (0, 0),
    }
    applied = {}
    for name, value in limits.items():
        try:
            resource.setrlimit(getattr(resource, name), value)
            applied[name] = value[0]
        except (ValueError, OSError):
            applied[name] = None
    iso["rlimits"] = applied
    iso["nproc_enforced"] = os.geteuid() != 0  # the kernel exempts root from RLIMIT_NPROC
    # Writing past RLIMIT_FSIZE raises OSError(EFBIG) instead of killing the worker.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.dont_write_bytecode = True
    for mod in ("ctypes", "_ctypes", "_posixsubprocess"):
        sys.modules.pop(mod, None)
    sys.addaudithook(_make_audit_hook(os.path.realpath(tmpdir)))
    return iso


def _make_audit_hook(tmpdir: str):
    blocked_prefixes = ("socket.", "ctypes.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "pty.", "_winapi.")
    blocked = frozenset({
        "os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg", "os.startfile",
        "_thread.start_new_thread", "resource.prlimit", "gc.get_referrers", "gc.get_objects",
        "sys._current_frames", "os.register_at_fork",
    })
    path_events = frozenset({
        "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
        "os.symlink", "os.truncate", "os.utime", "os.chflags", "os.lchflags", "os.setxattr",
        "os.removexattr", "shutil.rmtree", "shutil.copyfile", "shutil.copytree", "shutil.move",
        "shutil.copymode", "shutil.copystat", "shutil.chown", "os.mkfifo", "os.mknod",
    })
    blocked_imports = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "multiprocessing", "_multiprocessing"})
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    prefix = tmpdir + os.sep
    realpath = os.path.realpath
    fspath = os.fspath

    def inside(path: Any) -> bool:
        if isinstance(path, int):
            return False
        try:
            p = fspath(path)
            if isinstance(p, bytes):
                p = os.fsdecode(p)
            p = realpath(p)
        except Exception:
            return False
        return p == tmpdir or p.startswith(prefix) or p == "/dev/null"

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            if isinstance(mode, str):
                writing = "w" in mode or "a" in mode or "x" in mode or "+" in mode
            else:
                writing = bool(flags & write_flags) if isinstance(flags, int) else False
            if writing and not inside(path):
                raise PermissionError(f"sandbox: writing {path!r} is not allowed (only inside the temp dir)")
        elif event in blocked or event.startswith(blocked_prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")
        elif event in path_events:
            for path in args[:2]:
                if isinstance(path, (str, bytes, os.PathLike)) and not inside(path):
                    raise PermissionError(f"sandbox: {event} on {path!r} is not allowed")
        elif event == "import" and args[0] in blocked_imports:
            raise ImportError(f"sandbox: importing {args[0]} is not allowed")

    return hook


def _plain(value: Any, np: Any, depth: int = 0) -> Any:
    """``value`` as JSON-plain data, or ``TypeError``."""
    t = type(value)
    if t is float or t is int or t is str or t is bool or value is None:
        return value
    if depth > 50:
        raise TypeError("result nested too deeply")
    if isinstance(value, np.generic):
        return _plain(value.item(), np, depth + 1)
    if isinstance(value, np.ndarray):
        return _plain(value.tolist(), np, depth + 1)
    if isinstance(value, (list, tuple)):
        return [_plain(v, np, depth + 1) for v in value]
    if isinstance(value, dict) and all(type(k) is str for k in value):
        return {k: _plain(v, np, depth + 1) for k, v in value.items()}
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    raise TypeError(f"result of type {t.__name__} cannot leave the sandbox")


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 500 else text[:500] + "..."


def _last_def(tree: Any) -> str | None:
    import ast  # noqa: PLC0415

    name = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            name = node.name
    return name


def _run_item(item: dict, config: dict, np: Any, state: dict) -> dict:
    import ast  # noqa: PLC0415
    import builtins  # noqa: PLC0415
    import random  # noqa: PLC0415
    import resource  # noqa: PLC0415

    inputs = item["inputs"]
    entry = item["entry"]
    n = len(inputs)
    out = _CappedText(config["max_output_bytes"])
    reply: dict = {"k": item["k"], "status": "ok", "values": [None] * n, "errors": [None] * n, "message": ""}
    # Re-arm the CPU limit for this program.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(math.ceil(usage.ru_utime + usage.ru_stime + config["cpu_seconds"]))
    resource.setrlimit(resource.RLIMIT_CPU, (soft, resource.RLIM_INFINITY))
    random.seed(config["seed"])
    np.random.seed(config["seed"])
    saved_cwd_ok = True
    sys.stdout = sys.stderr = out
    try:
        try:
            tree = ast.parse(item["code"], "<program>", "exec")
            name = _last_def(tree) if entry == "last_def" else entry
            namespace = {"__name__": PROGRAM_NAME, "__builtins__": builtins}
            exec(compile(tree, "<program>", "exec"), namespace)  # noqa: S102 - sandboxed
            if name is None:
                raise LookupError("the program defines no top-level function")
            fn = namespace.get(name)
            if fn is None:
                raise LookupError(f"the program defines no function {name!r}")
            if not callable(fn):
                raise TypeError(f"{name!r} is not callable")
        except BaseException as exc:  # noqa: BLE001 - user code may raise anything
            msg = _describe(exc)
            reply.update(status="error", message=msg, errors=[msg] * n)
            return reply
        values, errors = reply["values"], reply["errors"]
        for i, x in enumerate(inputs):
            try:
                values[i] = _plain(fn(x), np)
            except BaseException as exc:  # noqa: BLE001
                errors[i] = _describe(exc)
    finally:
        sys.stdout, sys.stderr = state["stdout"], state["stderr"]
        try:
            if os.getcwd() != state["tmpdir"]:
                os.chdir(state["tmpdir"])
        except OSError:
            saved_cwd_ok = False
        reply["stdout"] = out.text()
        if out.dropped:
            reply["message"] = (reply["message"] + "; " if reply["message"] else "") + "output truncated"
    if not saved_cwd_ok:  # pragma: no cover - temp dir vanished
        reply["message"] = "temp dir lost"
    return reply


def _encode_reply(reply: dict, n_inputs: int, config: dict) -> bytes:
    limit = config["max_result_bytes"]
    encodable = (TypeError, ValueError, RecursionError, MemoryError)

    def dump() -> str | None:
        try:
            return json.dumps(reply, separators=(",", ":"), allow_nan=True)
        except encodable:
            return None

    data = dump()
    if data is None or len(data) > limit:
        # Fail only the inputs whose value cannot be encoded (an int too long for str(), a
        # string too big for memory) or is alone larger than the limit.
        for i, v in enumerate(reply["values"]):
            try:
                if len(json.dumps(v, allow_nan=True)) > limit:
                    raise ValueError(f"result larger than {limit} bytes")
            except encodable as exc:
                reply["values"][i] = None
                reply["errors"][i] = _describe(exc)
        data = dump()
    if data is None or len(data) > limit:
        msg = f"results larger than {limit} bytes in all or not encodable"
        data = json.dumps(
            {"k": reply["k"], "status": "error", "values": [None] * n_inputs, "errors": [msg] * n_inputs,
             "stdout": reply.get("stdout", "")[:1000], "message": msg},
            separators=(",", ":"),
        )
    return data.encode("utf-8", "surrogatepass") + b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _worker_main(config_json: str) -> None:  # pragma: no cover - runs in the subprocess
    config = json.loads(config_json)
    # Keep the protocol on private descriptors; fds 0-2 become /dev/null so that code writing
    # to "stdout" at the OS level cannot touch the protocol.
    req_fd, resp_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    try:
        iso = _worker_setup(config)
    except BaseException as exc:
        _write_all(resp_fd, json.dumps({"ready": False, "error": _describe(exc)}).encode() + b"\n")
        os._exit(1)
    import numpy as np

    state = {"stdout": sys.stdout, "stderr": sys.stderr, "tmpdir": os.getcwd()}
    _write_all(resp_fd, json.dumps({"ready": True, "pid": os.getpid(), "isolation": iso}).encode() + b"\n")
    requests = os.fdopen(req_fd, "rb", buffering=1 << 16)
    tmpdir = state["tmpdir"]
    while True:
        line = requests.readline()
        if not line:
            os._exit(0)
        msg = json.loads(line)
        for item in msg["items"]:
            reply = _run_item(item, config, np, state)
            # A program that left threads running taints this worker: reply, then exit so
            # that the parent starts a fresh one.
            retire = _thread._count() > 0
            if retire:
                reply["retire"] = True
            _write_all(resp_fd, _encode_reply(reply, len(item["inputs"]), config))
            if retire:
                os._exit(0)
            # Programs do not share files.
            try:
                leftovers = os.listdir(tmpdir)
            except OSError:
                leftovers = []
            for name in leftovers:
                path = os.path.join(tmpdir, name)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    try:
                        os.unlink(path)
                    except OSError:
                        pass


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) != 3 or sys.argv[1] != "--worker":
        sys.exit("usage: _worker.py --worker CONFIG_JSON (started by findbench.sandbox)")
    _worker_main(sys.argv[2])
