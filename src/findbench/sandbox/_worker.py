"""Fork server of :mod:`findbench.sandbox` (run as ``python -s -P .../sandbox/_worker.py --worker CONFIG``).

One such process (the *zygote*) starts per pool slot. It sets up what every program shares
(die-with-parent, no-new-privileges, a fresh network namespace, numpy and the usual stdlib
modules imported once), then serves requests: for every program it forks a child that

1. gets a fresh private directory (its working directory, ``$HOME`` and ``$TMPDIR``);
2. is confined by the kernel before any untrusted byte runs: a Landlock domain (read-only
   access to what Python needs, read-write to its own directory only, no TCP, no signals or
   abstract unix sockets outside the domain), an unprivileged uid when the zygote is root,
   resource limits (memory, CPU, file size, open files, no processes, no core dumps);
3. installs an audit hook (a readable first line of refusal with clear messages; never the
   boundary itself), runs the program and writes one JSON reply into a pipe, then exits.

The zygote enforces the wall-clock limit on the child, relays its reply and deletes its
directory. Nothing a program does survives it: module monkeypatches, threads, files, changed
builtins all die with the child, so a program's result does not depend on what ran before.

Kept apart from the package (the worker imports no findbench module and nothing it does not
need) and import-light, because children inherit every module the zygote loaded.

Protocol with the parent (newline-delimited JSON on two private pipes, never pickle): one line
``{"ready": true, "isolation": {...}}`` after set-up, then for every request line
``{"items": [{"k", "code", "inputs", "entry"}, ...]}`` one reply line per item
``{"k", "status", "values", "errors", "stdout", "message"}`` (status ``timeout`` / ``killed``
for a child that ran out of time or died).
"""

from __future__ import annotations

import ctypes
import json
import math
import os
import select
import shutil
import signal
import sys
import time
from typing import Any

_PRELOAD = (
    "numpy", "numpy.random", "numpy.linalg", "numpy.fft", "numpy.polynomial", "math", "cmath",
    "random", "re", "string", "itertools", "functools", "collections", "collections.abc",
    "statistics", "operator", "decimal", "fractions", "numbers", "json", "copy", "bisect", "heapq",
    "unicodedata", "textwrap", "datetime", "time", "calendar", "warnings", "typing", "enum",
    "dataclasses", "abc", "array", "struct", "base64", "binascii", "hashlib", "codecs",
    "encodings.idna", "ast", "tempfile", "resource",
)
# ``__name__`` of a program: not "__main__", so demo code under ``if __name__ == "__main__":``
# that interpreters like to append does not run.
PROGRAM_NAME = "__findbench_program__"
_NOBODY = 65534

# --------------------------------------------------------------------------- libc / Landlock

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_libc.unshare.restype = ctypes.c_int

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_PR_GET_NO_NEW_PRIVS = 39
_CLONE_NEWNET = 0x40000000
_CLONE_NEWUSER = 0x10000000

# Landlock (linux/landlock.h). The syscall numbers are the same on every architecture.
_SYS_LANDLOCK_CREATE_RULESET = 444
_SYS_LANDLOCK_ADD_RULE = 445
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1
_LANDLOCK_RULE_PATH_BENEATH = 1
_FS = {
    "execute": 1 << 0, "write_file": 1 << 1, "read_file": 1 << 2, "read_dir": 1 << 3,
    "remove_dir": 1 << 4, "remove_file": 1 << 5, "make_char": 1 << 6, "make_dir": 1 << 7,
    "make_reg": 1 << 8, "make_sock": 1 << 9, "make_fifo": 1 << 10, "make_block": 1 << 11,
    "make_sym": 1 << 12, "refer": 1 << 13, "truncate": 1 << 14, "ioctl_dev": 1 << 15,
}
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _errno_text() -> str:
    err = ctypes.get_errno()
    return f"{os.strerror(err)} (errno {err})"


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unsupported or disabled."""
    rc = _libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                       ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return int(rc) if rc > 0 else 0


def _fs_rights(abi: int) -> int:
    """Every file-system right the kernel's ABI knows (all of them are 'handled': denied unless granted)."""
    rights = (1 << 13) - 1  # ABI 1: execute .. make_sym
    if abi >= 2:
        rights |= _FS["refer"]
    if abi >= 3:
        rights |= _FS["truncate"]
    if abi >= 5:
        rights |= _FS["ioctl_dev"]
    return rights


_READ = _FS["execute"] | _FS["read_file"] | _FS["read_dir"]
_FILE_RIGHTS = _FS["execute"] | _FS["write_file"] | _FS["read_file"] | _FS["truncate"] | _FS["ioctl_dev"]


def _landlock_confine(abi: int, read_fds: list[tuple[int, bool]], write_fds: list[tuple[int, bool]]) -> None:
    """Restrict this process (and its future children) to the given paths, for good.

    ``read_fds`` / ``write_fds``: ``(O_PATH fd, is_directory)``; read grants read + execute,
    write grants every file-system right beneath. With ABI >= 4 TCP bind/connect are denied;
    with ABI >= 6 signals and abstract unix sockets cannot leave the domain. Raises OSError.
    """
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled, 0, 0)
    size = 8
    if abi >= 4:
        attr.handled_access_net = _NET_BIND_TCP | _NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL
        size = 24
    ruleset = _libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr), ctypes.c_size_t(size),
                            ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(f"landlock_create_ruleset: {_errno_text()}")
    try:
        for fds, rights in ((read_fds, _READ), (write_fds, handled)):
            for fd, is_dir in fds:
                allowed = (rights if is_dir else rights & _FILE_RIGHTS) & handled
                rule = _PathBeneathAttr(allowed, fd)
                if _libc.syscall(ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                 ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule), ctypes.c_uint32(0)) < 0:
                    raise OSError(f"landlock_add_rule: {_errno_text()}")
        if _libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)) < 0:
            raise OSError(f"landlock_restrict_self: {_errno_text()}")
    finally:
        os.close(ruleset)


def _read_roots() -> list[str]:
    """What a child may read: the interpreter, its stdlib and site-packages, shared libraries,
    and a few device files. Never ``$HOME``, the caller's checkout, caches or ``/etc`` (beyond
    the loader's cache)."""
    import sysconfig

    paths = {sys.base_prefix, sys.prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            paths.add(path)
    paths |= {"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache",
              "/dev/null", "/dev/urandom", "/dev/random", "/dev/zero"}
    out = []
    for path in sorted(paths):
        real = os.path.realpath(path)
        if os.path.exists(real) and real not in out:
            out.append(real)
    return out


def _others_can_read(directory: str) -> bool:
    """Whether an unprivileged uid can list ``directory`` (and reach it)."""
    path = os.path.realpath(directory)
    try:
        if os.stat(path).st_mode & 0o005 != 0o005:
            return False
        while path != "/":
            path = os.path.dirname(path)
            if not os.stat(path).st_mode & 0o001:
                return False
    except OSError:
        return False
    return True


def _open_path(path: str) -> tuple[int, bool]:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    return fd, os.path.isdir(path)


# --------------------------------------------------------------------------- program side


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


def _make_audit_hook(tmpdir: str):
    """The first line of refusal: clear messages for what a careless program tries. The kernel
    (Landlock, uid, rlimits, network namespace) enforces the same whatever happens here."""
    blocked_prefixes = ("socket.", "ctypes.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "pty.", "_winapi.")
    blocked = frozenset({
        "os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg", "os.startfile",
        "_thread.start_new_thread", "resource.prlimit", "resource.setrlimit", "gc.get_referrers",
        "gc.get_objects", "sys._current_frames", "os.register_at_fork", "signal.pthread_kill",
    })
    path_events = frozenset({
        "os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
        "os.symlink", "os.truncate", "os.utime", "os.chflags", "os.lchflags", "os.setxattr",
        "os.removexattr", "shutil.rmtree", "shutil.copyfile", "shutil.copytree", "shutil.move",
        "shutil.copymode", "shutil.copystat", "shutil.chown", "os.mkfifo", "os.mknod",
    })
    # (index of a path argument, index of its dir_fd argument) per event, as CPython raises them
    path_args = {
        "os.remove": ((0, 1),), "os.rmdir": ((0, 1),), "os.mkdir": ((0, 2),), "os.chmod": ((0, 2),),
        "os.chown": ((0, 3),), "os.utime": ((0, 3),), "os.mkfifo": ((0, 2),), "os.mknod": ((0, 3),),
        "os.symlink": ((1, 2),), "os.rename": ((0, 2), (1, 3)), "os.link": ((0, 2), (1, 3)),
        "shutil.copyfile": ((1, None),), "shutil.copytree": ((1, None),), "shutil.move": ((0, None), (1, None)),
        "shutil.copymode": ((1, None),), "shutil.copystat": ((1, None),),
    }
    blocked_imports = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "multiprocessing", "_multiprocessing"})
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    prefix = tmpdir + os.sep
    realpath = os.path.realpath
    fspath = os.fspath

    def inside(path: Any, dir_fd: Any = None) -> bool:
        if isinstance(path, int) or dir_fd not in (None, -1):
            return False  # a descriptor or a name relative to one: not checkable here
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
                raise PermissionError(f"sandbox: writing {path!r} is not allowed (only inside the program's own directory)")
        elif event in blocked or event.startswith(blocked_prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")
        elif event in path_events:
            for path_at, dir_fd_at in path_args.get(event, ((0, None),)):
                if path_at >= len(args):
                    continue
                path = args[path_at]
                dir_fd = args[dir_fd_at] if dir_fd_at is not None and dir_fd_at < len(args) else None
                if isinstance(path, (str, bytes, os.PathLike)) and not inside(path, dir_fd):
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
    import ast

    name = None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            name = node.name
    return name


def _run_program(item: dict, config: dict, np: Any) -> dict:
    """Run one program in this (already confined) process; the reply dict."""
    import ast
    import builtins

    inputs = item["inputs"]
    entry = item["entry"]
    n = len(inputs)
    out = _CappedText(config["max_output_bytes"])
    reply: dict = {"k": item["k"], "status": "ok", "values": [None] * n, "errors": [None] * n, "message": ""}
    saved = sys.stdout, sys.stderr
    sys.stdout = sys.stderr = out
    try:
        try:
            tree = ast.parse(item["code"], "<program>", "exec")
            name = _last_def(tree) if entry == "last_def" else entry
            namespace = {"__name__": PROGRAM_NAME, "__builtins__": builtins}
            exec(compile(tree, "<program>", "exec"), namespace)  # noqa: S102 - confined child process
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
        sys.stdout, sys.stderr = saved
        reply["stdout"] = out.text()
        if out.dropped:
            reply["message"] = (reply["message"] + "; " if reply["message"] else "") + "output truncated"
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


# --------------------------------------------------------------------------- the zygote


class _Zygote:
    """Set-up shared by all programs, and the fork-per-program loop."""

    def __init__(self, config: dict, req_fd: int, resp_fd: int):
        self.config = config
        self.req_fd, self.resp_fd = req_fd, resp_fd
        self.base = config["tmpdir"]
        self.np: Any = None
        self.read_fds: list[tuple[int, bool]] = []
        self.landlock = 0
        self.drop_uid = False
        self.iso: dict = {}
        #: (pid, directory) of children that replied and are still exiting
        self.pending: list[tuple[int, str]] = []

    def setup(self) -> dict:
        import resource

        cfg = self.config
        iso: dict = {"audit_hook": bool(cfg.get("audit_hook", True)), "fresh_process": True}
        # Die with the parent; never gain privileges through exec (Landlock needs this too).
        _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        iso["no_new_privs"] = _libc.prctl(_PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1
        # A fresh network namespace: only a loopback device, down. Before numpy starts threads.
        iso["network_namespace"] = False
        if cfg["isolate_network"]:
            if _libc.unshare(_CLONE_NEWNET) == 0 or (os.geteuid() != 0 and _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0):
                iso["network_namespace"] = True
        for name in _PRELOAD:
            __import__(name)
        import numpy as np

        self.np = np
        iso["bwrap"] = bool(cfg.get("bwrap"))
        abi = landlock_abi() if cfg["landlock"] else 0
        iso["landlock_abi"] = abi
        if abi and iso["no_new_privs"]:
            self.landlock = abi
            self.read_fds = [_open_path(p) for p in _read_roots()]
        iso["landlock"] = bool(self.landlock)
        self.drop_uid = bool(cfg["drop_privileges"]) and os.geteuid() == 0
        iso["uid"] = _NOBODY if self.drop_uid else os.geteuid()
        # Import directories that ``nobody`` may not reach (an interpreter under /root, say)
        # stay importable through descriptors opened now, as root: the child imports from
        # /proc/self/fd/N. Landlock still checks every file against the read-only roots.
        self.path_fds: dict[str, int] = {}
        if self.drop_uid:
            for entry in sys.path:
                if entry and os.path.isdir(entry) and not _others_can_read(entry):
                    self.path_fds[entry] = os.open(entry, os.O_RDONLY | os.O_DIRECTORY)
        iso["imports_through_fds"] = len(self.path_fds)
        if self.path_fds:
            self._import_through_fds()
        iso["nproc_enforced"] = iso["uid"] != 0  # the kernel exempts root from RLIMIT_NPROC
        if self.drop_uid:
            os.chmod(self.base, 0o711)  # nobody may enter its own directory, not list others
        mem = cfg["memory_mb"] * 1024 * 1024
        self.limits = {
            "RLIMIT_AS": (mem, mem),
            "RLIMIT_FSIZE": (cfg["max_file_bytes"], cfg["max_file_bytes"]),
            "RLIMIT_CORE": (0, 0),
            "RLIMIT_NOFILE": (64, 64),
            "RLIMIT_NPROC": (0, 0),
        }
        iso["rlimits"] = {name: value[0] for name, value in self.limits.items()}
        self.resource = resource
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.dont_write_bytecode = True
        self.iso = iso
        # Everything loaded so far is shared with the children copy-on-write; keep the garbage
        # collector from walking (and so copying) those pages in every child.
        import gc

        gc.collect()
        gc.freeze()
        return iso

    # -- in the child, between fork and the program
    def _confine(self, tmpdir: str) -> None:
        """Apply every layer to this child; raises if a promised kernel layer fails."""
        resource = self.resource
        for fd in (self.req_fd, self.resp_fd):
            os.close(fd)
        os.chdir(tmpdir)
        os.environ.update(HOME=tmpdir, TMPDIR=tmpdir)
        import tempfile

        tempfile.tempdir = tmpdir
        write_fd = _open_path(tmpdir)
        if self.drop_uid:
            os.setgroups([])
            os.setresgid(_NOBODY, _NOBODY, _NOBODY)
            os.setresuid(_NOBODY, _NOBODY, _NOBODY)
            if os.getuid() != _NOBODY or os.geteuid() != _NOBODY:
                raise OSError("could not drop to an unprivileged uid")
            if self.path_fds:
                # Changing uid made /proc/self root-owned; let the child read its own fd table.
                _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        cpu = max(1, math.ceil(self.config["cpu_seconds"]))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        for name, value in self.limits.items():
            resource.setrlimit(getattr(resource, name), value)
        if self.landlock:
            _landlock_confine(self.landlock, self.read_fds, [write_fd])
        for fd, _ in [*self.read_fds, write_fd]:
            os.close(fd)
        # Writing past RLIMIT_FSIZE raises OSError(EFBIG) instead of killing the child.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        for mod in ("ctypes", "_ctypes", "_posixsubprocess"):
            sys.modules.pop(mod, None)
        import types

        sys.modules["__main__"] = types.ModuleType("__main__")  # not this zygote's globals
        seed = self.config["seed"]
        import random

        random.seed(seed)
        self.np.random.seed(seed)
        if self.config.get("audit_hook", True):
            sys.addaudithook(_make_audit_hook(os.path.realpath(tmpdir)))

    def _import_through_fds(self) -> None:
        """Point the import system at /proc/self/fd/N for directories only root can reach.

        Done once in the fork server: its children inherit both the descriptors (same numbers)
        and the rewritten paths."""
        remap = {path: f"/proc/self/fd/{fd}" for path, fd in self.path_fds.items()}

        def moved(path: str) -> str:
            for old, new in remap.items():
                if path == old or path.startswith(old + os.sep):
                    return new + path[len(old):]
            return path

        sys.path[:] = [moved(p) for p in sys.path]
        sys.path_importer_cache.clear()
        for module in list(sys.modules.values()):
            paths = getattr(module, "__path__", None)
            if isinstance(paths, list):
                paths[:] = [moved(p) if isinstance(p, str) else p for p in paths]

    def _child(self, item: dict, tmpdir: str, w: int) -> None:  # pragma: no cover - runs in the child
        try:
            try:
                self._confine(tmpdir)
            except BaseException as exc:  # fail closed: never run a program half-confined
                msg = f"sandbox: could not confine the program: {_describe(exc)}"
                n = len(item["inputs"])
                reply = {"k": item["k"], "status": "error", "values": [None] * n, "errors": [msg] * n,
                         "stdout": "", "message": msg}
            else:
                reply = _run_program(item, self.config, self.np)
            _write_all(w, _encode_reply(reply, len(item["inputs"]), self.config))
            os.close(w)  # EOF for the fork server now, before this process is torn down
        finally:
            os._exit(0)

    # -- in the zygote
    def run_item(self, item: dict) -> bytes:
        tmpdir = os.path.join(self.base, f"p{item['k']}-{time.monotonic_ns()}")
        os.mkdir(tmpdir, 0o700)
        if self.drop_uid:
            os.chown(tmpdir, _NOBODY, _NOBODY)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            os.close(r)
            self._child(item, tmpdir, w)
        os.close(w)
        self.reap()  # the previous program's exit ran while this one started
        try:
            data, outcome = self._collect(r, pid)
        finally:
            os.close(r)
        if outcome is None and data.endswith(b"\n"):
            # A complete reply: the child is only exiting now. Reap it (and delete its
            # directory) later, so its teardown overlaps with the next program.
            self.pending.append((pid, tmpdir))
            return data
        shutil.rmtree(tmpdir, ignore_errors=True)  # _collect has reaped this child
        n = len(item["inputs"])
        status, message = outcome or ("killed", "the program exited without a reply")
        return json.dumps({"k": item["k"], "status": status, "values": [None] * n, "errors": [message] * n,
                           "stdout": "", "message": message}, separators=(",", ":")).encode() + b"\n"

    def reap(self) -> None:
        """Wait for children that already replied, and delete their directories."""
        while self.pending:
            self._wait(*self.pending.pop())

    @staticmethod
    def _wait(pid: int, tmpdir: str) -> int:
        try:
            os.kill(pid, signal.SIGKILL)  # it replied (or failed): nothing of it is still wanted
        except ProcessLookupError:
            pass
        _, status = os.waitpid(pid, 0)
        shutil.rmtree(tmpdir, ignore_errors=True)
        return status

    def _collect(self, r: int, pid: int) -> tuple[bytes, tuple[str, str] | None]:
        """The child's reply, and ``(status, message)`` when it did not finish properly (the
        child is then reaped here; after a complete reply it is left to :meth:`reap`)."""
        cfg = self.config
        deadline = time.monotonic() + cfg["timeout"]
        limit = cfg["max_result_bytes"] + 8 * cfg["max_output_bytes"] + 65536
        chunks, size, outcome = [], 0, None
        poller = select.poll()
        poller.register(r, select.POLLIN | select.POLLHUP | select.POLLERR)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome = ("timeout", f"wall-clock limit of {cfg['timeout']:g} s exceeded")
                break
            if not poller.poll(max(1, math.ceil(remaining * 1000))):
                continue
            chunk = os.read(r, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                outcome = ("killed", f"reply longer than {limit} bytes")
                break
        data = b"".join(chunks)
        if outcome is None and data.endswith(b"\n"):
            return data, None  # a complete reply; the caller reaps the child later
        if outcome is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
        if outcome is None and os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            if sig == signal.SIGXCPU:
                outcome = ("timeout", f"CPU time limit of {cfg['cpu_seconds']:g} s exceeded")
            else:
                try:
                    name = signal.Signals(sig).name
                except ValueError:
                    name = str(sig)
                outcome = ("killed", f"program killed by signal {name}")
        elif outcome is None and os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0:
            outcome = ("killed", f"program exited with code {os.WEXITSTATUS(status)}")
        return data, outcome

    def serve(self) -> None:
        requests = os.fdopen(self.req_fd, "rb", buffering=1 << 16, closefd=False)
        while True:
            self.reap()  # idle: no child may outlive the batch it belongs to
            line = requests.readline()
            if not line:
                os._exit(0)
            for item in json.loads(line)["items"]:
                _write_all(self.resp_fd, self.run_item(item))


def _worker_main(config_json: str) -> None:  # pragma: no cover - runs in the subprocess
    config = json.loads(config_json)
    # Keep the protocol on private descriptors; fds 0-2 become /dev/null so that code writing
    # to "stdout" at the OS level cannot touch the protocol.
    req_fd, resp_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    zygote = _Zygote(config, req_fd, resp_fd)
    try:
        iso = zygote.setup()
    except BaseException as exc:
        _write_all(resp_fd, json.dumps({"ready": False, "error": _describe(exc)}).encode() + b"\n")
        os._exit(1)
    _write_all(resp_fd, json.dumps({"ready": True, "pid": os.getpid(), "isolation": iso}).encode() + b"\n")
    zygote.serve()


if __name__ == "__main__":  # pragma: no cover
    if len(sys.argv) != 3 or sys.argv[1] != "--worker":
        sys.exit("usage: _worker.py --worker CONFIG_JSON (started by findbench.sandbox)")
    _worker_main(sys.argv[2])
