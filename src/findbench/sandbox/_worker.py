"""Fork server of :mod:`findbench.sandbox` (run as ``python -s -P .../sandbox/_worker.py --worker CONFIG``).

One such process (the *zygote*) starts per pool slot. It sets up what every program shares
(die-with-parent, no-new-privileges, fresh namespaces, a tmpfs, numpy imported once), then forks
one child per program. The child gets a fresh size-capped tmpfs directory, closes every
descriptor but its reply pipe, is confined (Landlock, uid, parent-death signal, rlimits, seccomp
last), installs the audit hook, runs the program, writes one JSON reply and exits. The zygote
enforces the wall-clock limit, relays the reply and never holds a request or reply where a child
could find it (see :class:`_Zygote`). It imports no findbench module: children inherit every
module it loaded.

Protocol with the parent (two private pipes, never pickle): one line
``{"ready": true, "isolation": {...}}`` after set-up; then per request a 4-byte big-endian
length and the item's JSON ``{"k", "code", "inputs", "entry"}``; per request one header line
written by the zygote, ``{"outcome": null | [status, message], "size": N}``, followed by the
``N`` bytes the child wrote (``{"k", "status", "values", "errors", "stdout", "message"}`` from
an honest program; the parent checks them). ``outcome`` is set (``timeout`` / ``killed``) for
a child that ran out of time, died or wrote no complete line.

Services: a request whose length has bit 31 set may call the parent while it runs. Its child
gets a call pipe and an answer pipe; the functions named in the item's ``"services"`` write one
line ``{"tool", "args", "kwargs"}`` per call and wait for the answer line. The zygote relays each
line (at most :data:`MAX_CALL_BYTES`) to the parent behind a header with ``"call": true``, reads the
parent's framed answer (as a request is framed) and hands it back; the time spent waiting on the
parent does not count against the program's wall clock. A child that writes a longer line or
leaves answers unread is killed.
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import ctypes
import gc
import importlib.util
import io
import json
import math
import mmap
import os
import pathlib
import random
import resource
import select
import signal
import site
import sys
import sysconfig
import tempfile
import time
import traceback
import types
from typing import Any

_PRELOAD = (
    "numpy", "numpy.random", "numpy.linalg", "numpy.fft", "numpy.polynomial", "math", "cmath",
    "random", "re", "string", "itertools", "functools", "collections", "collections.abc",
    "statistics", "operator", "decimal", "fractions", "numbers", "json", "copy", "bisect", "heapq",
    "unicodedata", "textwrap", "datetime", "time", "calendar", "warnings", "typing", "enum",
    "dataclasses", "abc", "array", "struct", "base64", "binascii", "hashlib", "codecs",
    "encodings.idna", "ast", "tempfile", "resource",
)
# ``__name__`` of a program: not "__main__", so appended ``if __name__ == "__main__":`` demos do not run.
PROGRAM_NAME = "__findbench_program__"
#: The third-party packages a program may import (its read-only roots beside the stdlib).
PROGRAM_PACKAGES = ("numpy",)
_NOBODY = 65534
#: Longest call line a program may send to a service; bit 31 of a request's length asks for services.
MAX_CALL_BYTES, SERVICES_BIT = 64 * 1024, 1 << 31

# --------------------------------------------------------------------------- libc / Landlock

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long  # prctl, unshare and mount return ctypes' default restype, an int

# prctl options (linux/prctl.h), namespace flags of unshare (linux/sched.h), mount flags (linux/mount.h)
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS, _PR_GET_NO_NEW_PRIVS = 1, 4, 22, 38, 39
_SECCOMP_MODE_FILTER = 2
_CLONE_NEWNS, _CLONE_NEWIPC, _CLONE_NEWUSER, _CLONE_NEWNET = 0x00020000, 0x08000000, 0x10000000, 0x40000000
_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE, _MNT_DETACH = 2, 4, 1 << 14, 1 << 18, 2

# Landlock (linux/landlock.h). The syscall numbers are the same on every architecture.
_SYS_LANDLOCK_CREATE_RULESET, _SYS_LANDLOCK_ADD_RULE, _SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
_LANDLOCK_CREATE_RULESET_VERSION = _LANDLOCK_RULE_PATH_BENEATH = 1
_FS = {
    "execute": 1 << 0, "write_file": 1 << 1, "read_file": 1 << 2, "read_dir": 1 << 3,
    "remove_dir": 1 << 4, "remove_file": 1 << 5, "make_char": 1 << 6, "make_dir": 1 << 7,
    "make_reg": 1 << 8, "make_sock": 1 << 9, "make_fifo": 1 << 10, "make_block": 1 << 11,
    "make_sym": 1 << 12, "refer": 1 << 13, "truncate": 1 << 14, "ioctl_dev": 1 << 15,
}
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1
_SCOPE_ABSTRACT_UNIX_SOCKET, _SCOPE_SIGNAL = 1 << 0, 1 << 1


class _SockFprog(ctypes.Structure):
    """``struct sock_fprog``: a classic BPF program (the seccomp filter the parent compiled)."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _checked(rc: int, what: str) -> int:
    """``rc`` of a C call, or ``OSError`` naming ``what`` and errno when it failed (a negative ``rc``)."""
    if rc < 0:
        raise OSError(f"{what}: {os.strerror(ctypes.get_errno())} (errno {ctypes.get_errno()})")
    return rc


_READ = _FS["execute"] | _FS["read_file"] | _FS["read_dir"]
_FILE_RIGHTS = _FS["execute"] | _FS["write_file"] | _FS["read_file"] | _FS["truncate"] | _FS["ioctl_dev"]


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is unsupported or disabled."""
    return max(0, int(_libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                                    ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))))


def _landlock_confine(abi: int, read_fds: list[tuple[int, bool]], write_fds: list[tuple[int, bool]]) -> None:
    """Restrict this process (and its future children) to the given paths, for good.

    ``read_fds`` / ``write_fds``: ``(O_PATH fd, is_directory)``; read grants read + execute,
    write grants every file-system right beneath. With ABI >= 4 TCP bind/connect are denied;
    with ABI >= 6 signals and abstract unix sockets cannot leave the domain. Raises OSError.
    """
    # every file-system right the ABI knows, all 'handled' (denied unless granted): ABI 1 has execute .. make_sym
    handled = (1 << 13) - 1 | sum(_FS[name] for name, since in (("refer", 2), ("truncate", 3), ("ioctl_dev", 5))
                                  if abi >= since)
    attr = _RulesetAttr(handled, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0,
                        _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL if abi >= 6 else 0)
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _checked(_libc.syscall(ctypes.c_long(_SYS_LANDLOCK_CREATE_RULESET), ctypes.byref(attr),
                                     ctypes.c_size_t(size), ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for fds, rights in ((read_fds, _READ), (write_fds, handled)):
            for fd, is_dir in fds:
                rule = _PathBeneathAttr((rights if is_dir else rights & _FILE_RIGHTS) & handled, fd)
                _checked(_libc.syscall(ctypes.c_long(_SYS_LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                       ctypes.c_int(_LANDLOCK_RULE_PATH_BENEATH), ctypes.byref(rule),
                                       ctypes.c_uint32(0)), "landlock_add_rule")
        _checked(_libc.syscall(ctypes.c_long(_SYS_LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0)),
                 "landlock_restrict_self")
    finally:
        os.close(ruleset)


def _site_dirs() -> set[str]:
    """Every site-packages / dist-packages folder this interpreter knows of."""
    dirs = {sysconfig.get_paths().get(key) for key in ("purelib", "platlib")}
    with contextlib.suppress(AttributeError):  # site without these (embedded interpreters)
        dirs |= set(site.getsitepackages()) | {site.getusersitepackages()}
    dirs |= {p for p in sys.path if os.path.basename(p) in ("site-packages", "dist-packages")}
    return {os.path.realpath(d) for d in dirs if d}


def _carve(roots: list[str], denied: set[str]) -> list[str]:
    """``roots`` minus everything beneath a denied path: a root holding a denied path is replaced
    by its entries (Landlock and bubblewrap grant whole trees)."""
    out: list[str] = []
    todo = sorted({os.path.realpath(r) for r in roots}, reverse=True)
    while todo:
        path = todo.pop()
        if not os.path.exists(path) or any(path == d or path.startswith(d + os.sep) for d in denied):
            continue
        if any(d.startswith(path + os.sep) for d in denied) and os.path.isdir(path):
            todo.extend(sorted((os.path.join(path, e) for e in os.listdir(path)), reverse=True))
        elif path not in out:
            out.append(path)
    return out


def _read_roots(packages: tuple[str, ...] = PROGRAM_PACKAGES, deny: tuple[str, ...] = ()) -> list[str]:
    """What a child may read: the interpreter, its stdlib and shared libraries, ``packages``
    (with their ``.libs``) and a few device files; never another site-packages entry, ``deny``,
    ``$HOME`` or ``/etc`` beyond the loader's cache."""
    roots = {os.path.realpath(sys.executable), *filter(None, map(sysconfig.get_paths().get, ("stdlib", "platstdlib")))}
    roots |= {"/lib", "/lib64", "/usr/lib", "/usr/lib64", "/usr/local/lib", "/etc/ld.so.cache",
              "/dev/null", "/dev/urandom", "/dev/random", "/dev/zero"}
    out = _carve(sorted(roots), _site_dirs() | {os.path.realpath(d) for d in deny})
    folders = [f for name in packages for f in getattr(importlib.util.find_spec(name), "submodule_search_locations",
                                                       None) or []]
    extra = dict.fromkeys(os.path.realpath(p) for folder in folders for p in (folder, folder + ".libs"))
    return out + [p for p in extra if os.path.exists(p) and p not in out]


def _others_can_read(directory: str) -> bool:
    """Whether an unprivileged uid can list ``directory`` (and reach it)."""
    path = pathlib.Path(os.path.realpath(directory))
    try:
        return path.stat().st_mode & 0o005 == 0o005 and all(p.stat().st_mode & 0o001 for p in path.parents)
    except OSError:
        return False


def _open_path(path: str) -> tuple[int, bool]:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    return fd, os.path.isdir(path)


# --------------------------------------------------------------------------- program side


class _CappedText(io.StringIO):
    """A text stream that keeps the first ``cap`` characters written to it."""

    dropped = 0

    def __init__(self, cap: int):
        super().__init__()
        self.cap = cap

    def write(self, s: str) -> int:
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        self.dropped += len(s) - super().write(s[: max(0, self.cap - self.tell())])
        return len(s)

    def close(self) -> None:
        """Kept open: a program closing its stdout does not lose what it wrote."""

    def text(self) -> str:
        return self.getvalue() + (f"\n[... {self.dropped} characters dropped]" if self.dropped else "")


def _make_audit_hook(tmpdir: str):
    """Clear refusals for what a careless program tries; the kernel layers enforce the same."""
    blocked_prefixes = (
        "socket.", "ctypes.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "pty.", "_winapi."
    )
    blocked = frozenset(
        {
            "os.system",
            "os.fork",
            "os.forkpty",
            "os.kill",
            "os.killpg",
            "os.startfile",
            "_thread.start_new_thread",
            "resource.prlimit",
            "resource.setrlimit",
            "gc.get_referrers",
            "gc.get_objects",
            "sys._current_frames",
            "os.register_at_fork",
            "signal.pthread_kill",
        }
    )
    # The events on paths: (index of a path argument, index of its dir_fd argument) per event, as CPython raises them
    path_args = dict.fromkeys(("os.truncate", "os.chflags", "os.lchflags", "os.setxattr", "os.removexattr",
                               "shutil.rmtree", "shutil.chown"), ((0, None),)) | {
        "os.remove": ((0, 1),),
        "os.rmdir": ((0, 1),),
        "os.mkdir": ((0, 2),),
        "os.chmod": ((0, 2),),
        "os.chown": ((0, 3),),
        "os.utime": ((0, 3),),
        "os.mkfifo": ((0, 2),),
        "os.mknod": ((0, 3),),
        "os.symlink": ((1, 2),),
        "os.rename": ((0, 2), (1, 3)),
        "os.link": ((0, 2), (1, 3)),
        "shutil.copyfile": ((1, None),),
        "shutil.copytree": ((1, None),),
        "shutil.move": ((0, None), (1, None)),
        "shutil.copymode": ((1, None),),
        "shutil.copystat": ((1, None),),
    }
    blocked_imports = frozenset({"ctypes", "_ctypes", "_posixsubprocess", "multiprocessing", "_multiprocessing"})
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    prefix = tmpdir + os.sep

    def inside(path: Any, dir_fd: Any = None) -> bool:
        if isinstance(path, int) or dir_fd not in (None, -1):
            return False  # a descriptor or a name relative to one: not checkable here
        try:
            p = os.path.realpath(os.fsdecode(path))  # str, bytes or a path object
        except Exception:
            return False
        return p == tmpdir or p.startswith(prefix) or p == "/dev/null"

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writing = any(c in mode for c in "wax+") if isinstance(mode, str) else (
                isinstance(flags, int) and bool(flags & write_flags))
            if writing and not inside(path):
                raise PermissionError(
                    f"sandbox: writing {path!r} is not allowed (only inside the program's own directory)"
                )
        elif event in blocked or event.startswith(blocked_prefixes):
            raise PermissionError(f"sandbox: {event} is not allowed")
        elif event in path_args:
            for path_at, dir_fd_at in path_args[event]:
                path = args[path_at] if path_at < len(args) else None
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
    if isinstance(value, (np.generic, np.ndarray)):
        return _plain(value.tolist(), np, depth + 1)
    if isinstance(value, (list, tuple)):
        return [_plain(v, np, depth + 1) for v in value]
    if isinstance(value, dict) and all(type(k) is str for k in value):
        return {k: _plain(v, np, depth + 1) for k, v in value.items()}
    for kind in (int, float, str):  # subclasses (an IntEnum, a str subclass) as the plain type
        if isinstance(value, kind):
            return kind(value)
    raise TypeError(f"result of type {t.__name__} cannot leave the sandbox")


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:
        text = "<unprintable>"
    text = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return text if len(text) <= 500 else text[:500] + "..."


class ToolError(Exception):
    """A service's refusal of a program's call (its message says why)."""


def _services(names: list, channel: tuple[int, int], np: Any) -> dict:
    """The program's functions ``names``: each call is one line on the call pipe, answered on the other."""
    calls_w, answers = channel[0], os.fdopen(channel[1], "rb")

    def service(name: str):
        def call(*args: Any, **kwargs: Any) -> Any:
            line = json.dumps({"tool": name, "args": _plain(args, np), "kwargs": _plain(kwargs, np)})
            _write_all(calls_w, line.encode("utf-8", "surrogatepass") + b"\n")
            answer = json.loads(answers.readline() or b'{"error": "no answer"}')
            if "error" in answer:
                raise ToolError(answer["error"])
            return answer["reply"]

        call.__name__ = call.__qualname__ = name
        return call

    return {"ToolError": ToolError} | {str(name): service(str(name)) for name in names}


def _run_program(item: dict, config: dict, np: Any, channel: tuple[int, int] | None = None) -> dict:
    """Run one program in this (already confined) process; the reply dict. Entry ``None``: the
    program is a script (run, nothing called); ``channel``: its services' pipes."""
    inputs, n = item["inputs"], len(item["inputs"])
    out = _CappedText(config["max_output_bytes"])
    reply: dict = {"k": item["k"], "status": "ok", "values": [None] * n, "errors": [None] * n, "message": ""}
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            tree = ast.parse(item["code"], "<program>", "exec")
            defs = [node.name for node in tree.body if isinstance(node, ast.FunctionDef)]
            name = (defs[-1] if defs else None) if item["entry"] == "last_def" else item["entry"]
            namespace = {"__name__": PROGRAM_NAME, "__builtins__": builtins}
            if channel is not None:
                namespace |= _services(item.get("services") or [], channel, np)
            exec(compile(tree, "<program>", "exec"), namespace)  # noqa: S102 - confined child process
            if item["entry"] is None:
                return reply | {"stdout": out.text()}
            fn = namespace.get(name)
            if fn is None:
                raise LookupError(f"the program defines no function {name!r}" if name else
                                  "the program defines no top-level function")
            if not callable(fn):
                raise TypeError(f"{name!r} is not callable")
            for i, x in enumerate(inputs):  # an exception fails its own input only
                try:
                    reply["values"][i] = _plain(fn(x), np)
                except BaseException as exc:  # noqa: BLE001
                    reply["errors"][i] = _describe(exc)
        except BaseException as exc:  # noqa: BLE001 - user code may raise anything while loading
            msg = _describe(exc)
            lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__) if f.filename == "<program>"]
            if item["entry"] is None and lines:  # a script's error says where
                msg = f"line {lines[-1]}: {msg}"
            reply.update(status="error", message=msg, values=[None] * n, errors=[msg] * n)
    reply["stdout"] = out.text()
    if out.dropped:
        reply["message"] = (reply["message"] + "; " if reply["message"] else "") + "output truncated"
    return reply


def _encode_reply(reply: dict, n_inputs: int, config: dict) -> bytes:
    limit = config["max_result_bytes"]
    encodable = (TypeError, ValueError, RecursionError, MemoryError)
    for shrink in (False, True):
        if shrink:  # fail only the inputs whose value cannot be encoded (an int too long for str(), a
            # string too big for memory) or is alone larger than the limit
            for i, v in enumerate(reply["values"]):
                try:
                    if len(json.dumps(v, allow_nan=True)) > limit:
                        raise ValueError(f"result larger than {limit} bytes")
                except encodable as exc:
                    reply["values"][i], reply["errors"][i] = None, _describe(exc)
        with contextlib.suppress(*encodable):
            data = json.dumps(reply, separators=(",", ":"), allow_nan=True)
            if len(data) <= limit:
                return data.encode("utf-8", "surrogatepass") + b"\n"
    msg = f"results larger than {limit} bytes in all or not encodable"
    data = json.dumps({"k": reply["k"], "status": "error", "values": [None] * n_inputs, "errors": [msg] * n_inputs,
                       "stdout": reply.get("stdout", "")[:1000], "message": msg}, separators=(",", ":"))
    return data.encode("utf-8", "surrogatepass") + b"\n"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


# --------------------------------------------------------------------------- the zygote


def signal_name(sig: int) -> str:
    """``SIGKILL`` for 9 (the number itself for one Python does not name)."""
    return {s.value: s.name for s in signal.Signals}.get(sig, str(sig))


def _read_exact(fd: int, view: memoryview) -> bool:
    """Fill ``view`` from ``fd`` (no Python copy of the bytes); False on EOF."""
    got = 0
    while got < len(view):
        n = os.readv(fd, [view[got:]])
        if n == 0:
            return False
        got += n
    return True


def rmtree(path: str) -> None:
    """Delete ``path`` and everything beneath it without recursion (a program may nest
    thousands of folders; ``shutil.rmtree`` recurses before Python 3.13) and without following
    links; errors are ignored."""
    stack = [(path, False)]
    while stack:
        top, emptied = stack.pop()
        if emptied:
            with contextlib.suppress(OSError):
                os.rmdir(top)
            continue
        stack.append((top, True))
        with contextlib.suppress(OSError), os.scandir(top) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    stack.append((entry.path, False))
                else:
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)


def _mount_tmpfs(target: str, options: str) -> int:
    """0 once a tmpfs with ``options`` is mounted on ``target``, -1 when that failed (errno set)."""
    return _libc.mount(b"findbench", os.fsencode(target), b"tmpfs", ctypes.c_ulong(_MS_NOSUID | _MS_NODEV),
                       options.encode())


class _Zygote:
    """Set-up shared by all programs, and the fork-per-program loop.

    Requests and replies pass through buffers no child inherits (``MADV_DONTFORK``); each
    request is copied out just before its child is forked and zeroed right after, so a child's
    memory holds its own request and nothing of any other program."""

    def __init__(self, config: dict, req_fd: int, resp_fd: int):
        self.config = config
        self.req_fd, self.resp_fd = req_fd, resp_fd
        self.base = config["tmpdir"]
        self.tmpfs = False
        self.inbox = mmap.mmap(-1, config["max_request_bytes"])
        self.reply = mmap.mmap(-1, config["max_result_bytes"] + 8 * config["max_output_bytes"] + 65536)
        self.calls = mmap.mmap(-1, MAX_CALL_BYTES)
        for buf in (self.inbox, self.reply, self.calls):
            buf.madvise(mmap.MADV_DONTFORK)  # anonymous mappings that forked children do not inherit
        self.request = bytearray()
        #: (pid, directory) of children that replied and are still exiting
        self.pending: list[tuple[int, str]] = []

    def _namespaces(self, iso: dict) -> None:
        """Fresh network, IPC and mount namespaces for the zygote and its children (a user
        namespace too when not root), and a size-capped tmpfs as the children's base folder."""
        cfg = self.config
        wanted = {
            "network_namespace": _CLONE_NEWNET if cfg["isolate_network"] else 0,
            "ipc_namespace": _CLONE_NEWIPC,
            "mount_namespace": _CLONE_NEWNS,
        }
        iso.update(dict.fromkeys(wanted, False))
        if os.geteuid() == 0:
            iso.update({name: bool(flag) and _libc.unshare(flag) == 0 for name, flag in wanted.items()})
        else:
            uid, gid = os.geteuid(), os.getegid()
            if _libc.unshare(_CLONE_NEWUSER | sum(wanted.values())) == 0:  # distinct bits: the sum is their union
                with contextlib.suppress(OSError):  # map ourselves, so the files we make keep our uid
                    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                                       ("gid_map", f"{gid} {gid} 1")):
                        pathlib.Path(f"/proc/self/{name}").write_text(text)
                iso.update({name: bool(flag) for name, flag in wanted.items()})
            elif _libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
                iso["network_namespace"] = bool(wanted["network_namespace"])
        if iso["mount_namespace"]:
            # Nothing mounted here reaches the host, and the host sees no program's files.
            _libc.mount(None, b"/", None, ctypes.c_ulong(_MS_REC | _MS_PRIVATE), None)
            self.tmpfs = _mount_tmpfs(self.base, "size=1m,nr_inodes=4096,mode=0711") == 0
        iso["disk_cap_bytes"] = cfg["max_disk_bytes"] if self.tmpfs else None

    def setup(self) -> dict:
        cfg = self.config
        # Die with the parent; never gain privileges through exec (Landlock needs this too).
        _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
        no_new_privs = _libc.prctl(_PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1
        iso: dict = {"audit_hook": bool(cfg.get("audit_hook", True)), "fresh_process": True,
                     "no_new_privs": no_new_privs}
        self._namespaces(iso)  # before numpy starts threads
        for name in _PRELOAD:
            __import__(name)
        self.np = sys.modules["numpy"]
        abi = landlock_abi() if cfg["landlock"] else 0
        self.landlock = abi if no_new_privs else 0
        self.read_fds: list[tuple[int, bool]] = [_open_path(p) for p in _read_roots(
            tuple(cfg["packages"]), tuple(cfg["deny"]))] if self.landlock else []
        bpf = base64.b64decode(cfg.get("seccomp_bpf") or "") if no_new_privs else b""
        self._seccomp_filter = ctypes.create_string_buffer(bpf, len(bpf))
        self.seccomp = _SockFprog(len(bpf) // 8, ctypes.cast(self._seccomp_filter, ctypes.c_void_p)) if bpf else None
        self.drop_uid = bool(cfg["drop_privileges"]) and os.geteuid() == 0
        uid = _NOBODY if self.drop_uid else os.geteuid()
        # Import directories that ``nobody`` may not reach (an interpreter under /root, say)
        # stay importable through descriptors opened now, as root: the child imports from
        # /proc/self/fd/N. Landlock still checks every file against the read-only roots.
        self.path_fds = {entry: os.open(entry, os.O_RDONLY | os.O_DIRECTORY) for entry in sys.path
                         if self.drop_uid and entry and os.path.isdir(entry) and not _others_can_read(entry)}
        if self.path_fds:
            self._import_through_fds()
        if self.drop_uid:
            os.chmod(self.base, 0o711)  # nobody may enter its own directory, not list others
        self.rlimits = {
            "RLIMIT_AS": (cfg["memory_mb"] * 1024 * 1024,) * 2,
            "RLIMIT_FSIZE": (cfg["max_file_bytes"],) * 2,
            "RLIMIT_CORE": (0, 0),
            "RLIMIT_NOFILE": (64, 64),
            "RLIMIT_NPROC": (0, 0),
        }
        # No program may change a file's mode, owner, times or xattrs: the filter refuses those
        # calls, and inside bubblewrap every file but the server's own is on a read-only mount.
        iso.update({
            "bwrap": bool(cfg.get("bwrap")),
            "landlock_abi": abi,
            "landlock": bool(self.landlock),
            "seccomp": self.seccomp is not None,
            "file_metadata_locked": self.seccomp is not None or bool(cfg.get("bwrap")),
            "uid": uid,
            "imports_through_fds": len(self.path_fds),
            "nproc_enforced": uid != 0,  # the kernel exempts root from RLIMIT_NPROC
            "rlimits": {name: value[0] for name, value in self.rlimits.items()},
        })
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.dont_write_bytecode = True
        # Everything loaded so far is shared with the children copy-on-write; keep the garbage
        # collector from walking (and so copying) those pages in every child.
        gc.collect()
        gc.freeze()
        return iso

    # -- in the child, between fork and the program
    def _confine(self, tmpdir: str, w: int, channel: tuple[int, int] | None) -> None:
        """Apply every layer to this child; raises if a promised kernel layer fails."""
        zygote = os.getppid()
        # Only the reply pipe (and the services' pipes) stay open (and the import folders only root could reach).
        keep = sorted({w, *(channel or ()), *self.path_fds.values(), *(fd for fd, _ in self.read_fds)})
        for low, high in zip([3] + [fd + 1 for fd in keep], keep + [1 << 20]):
            os.closerange(low, high)
        os.chdir(tmpdir)
        os.environ.update(HOME=tmpdir, TMPDIR=tmpdir)
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
        # Die with the zygote (which dies with the caller); set after the uid change, which
        # clears it, and checked against a zygote that died in between.
        _libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != zygote:
            os._exit(1)
        cpu = max(1, math.ceil(self.config["cpu_seconds"]))
        resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
        if self.landlock:
            _landlock_confine(self.landlock, self.read_fds, [write_fd])
        for fd, _ in [*self.read_fds, write_fd]:
            os.close(fd)
        for name, value in self.rlimits.items():  # after Landlock: its ruleset needs a descriptor
            resource.setrlimit(getattr(resource, name), value)
        # Writing past RLIMIT_FSIZE raises OSError(EFBIG) instead of killing the child.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        for mod in ("ctypes", "_ctypes", "_posixsubprocess"):
            sys.modules.pop(mod, None)
        sys.modules["__main__"] = types.ModuleType("__main__")  # not this zygote's globals
        random.seed(self.config["seed"])
        self.np.random.seed(self.config["seed"])
        # last: the filter refuses what the set-up above used
        if self.seccomp:
            _checked(_libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(self.seccomp), 0, 0), "seccomp")
        if self.config.get("audit_hook", True):
            sys.addaudithook(_make_audit_hook(os.path.realpath(tmpdir)))

    def _import_through_fds(self) -> None:
        """Point the import system at /proc/self/fd/N for directories only root can reach
        (children inherit the descriptors and the rewritten paths)."""
        remap = {path: f"/proc/self/fd/{fd}" for path, fd in self.path_fds.items()}

        def moved(path: str) -> str:
            old = next((old for old in remap if path == old or path.startswith(old + os.sep)), None)
            return path if old is None else remap[old] + path[len(old) :]

        sys.path[:] = [moved(p) for p in sys.path]
        sys.path_importer_cache.clear()
        for module in list(sys.modules.values()):
            paths = getattr(module, "__path__", None)
            if isinstance(paths, list):
                paths[:] = [moved(p) if isinstance(p, str) else p for p in paths]

    def _child(self, tmpdir: str, w: int, channel: tuple[int, int] | None) -> None:  # pragma: no cover - child
        try:
            doing, item = "unreadable request", None
            try:
                item = json.loads(bytes(self.request))
                doing = "could not confine the program"
                self._confine(tmpdir, w, channel)
            except BaseException as exc:  # fail closed: never run a program half-confined
                msg, n = f"sandbox: {doing}: {_describe(exc)}", len(item["inputs"]) if item is not None else 0
                reply = {"k": item["k"] if item is not None else -1, "status": "error", "values": [None] * n,
                         "errors": [msg] * n, "stdout": "", "message": msg}
                _write_all(w, json.dumps(reply).encode() + b"\n")
            else:
                reply = _run_program(item, self.config, self.np, channel)
                _write_all(w, _encode_reply(reply, len(item["inputs"]), self.config))
            os.close(w)  # EOF for the fork server now, before this process is torn down
        finally:
            os._exit(0)

    # -- in the zygote
    def _program_dir(self) -> str:
        tmpdir = os.path.join(self.base, f"p{time.monotonic_ns()}")
        os.mkdir(tmpdir, 0o700)
        if self.tmpfs:
            owner = f",uid={_NOBODY},gid={_NOBODY}" if self.drop_uid else ""
            size = f"size={self.config['max_disk_bytes']},nr_inodes={self.config['max_files']}"
            _checked(_mount_tmpfs(tmpdir, f"{size},mode=0700{owner}"), "mounting the program's tmpfs failed")
        elif self.drop_uid:
            os.chown(tmpdir, _NOBODY, _NOBODY)
        return tmpdir

    def _remove_dir(self, tmpdir: str) -> None:
        if self.tmpfs:
            _libc.umount2(os.fsencode(tmpdir), _MNT_DETACH)  # frees every file at once, leaves the folder empty
        rmtree(tmpdir)

    def run_item(self, size: int, services: bool) -> None:
        """Fork a child for the request in ``self.request``; relay its reply behind a header line
        (and, with ``services``, its calls; see the module docstring)."""
        tmpdir = self._program_dir()
        r, w = os.pipe()
        # services: a call pipe (the child writes, the zygote reads) and an answer pipe (the other way)
        calls_r, calls_w, answers_r, answers_w = (*os.pipe(), *os.pipe()) if services else (None,) * 4
        child_end, own_end = ((calls_w, answers_r), (calls_r, answers_w)) if services else (None, None)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - child
            for fd in (r, *(own_end or ())):
                os.close(fd)
            self._child(tmpdir, w, child_end)
        self.request[:] = bytes(size)  # the zygote keeps nothing of the request
        self.request = bytearray()
        for fd in (w, *(child_end or ())):
            os.close(fd)
        if own_end:
            os.set_blocking(answers_w, False)  # a child that leaves answers unread is killed, never waited for
        self.reap()  # the previous program's exit ran while this one started
        try:
            got, outcome = self._collect(r, pid, own_end)
        finally:
            for fd in (r, *(own_end or ())):
                os.close(fd)
        if outcome is None:
            # A complete reply: the child is only exiting now. Reap it (and delete its
            # directory) later, so its teardown overlaps with the next program.
            self.pending.append((pid, tmpdir))
        else:
            self._remove_dir(tmpdir)  # _collect has reaped this child (and says got 0)
        self._send(self.reply, got, outcome=outcome)

    def _send(self, buf: mmap.mmap, size: int, **header: Any) -> None:
        """One frame to the parent: the header line (with ``size``), then the first ``size`` bytes of ``buf``."""
        _write_all(self.resp_fd, json.dumps(header | {"size": size}, separators=(",", ":")).encode() + b"\n")
        with memoryview(buf) as view:
            _write_all(self.resp_fd, view[:size])

    def reap(self) -> None:
        """Wait for children that already replied, and delete their directories."""
        while self.pending:
            pid, tmpdir = self.pending.pop()
            os.kill(pid, signal.SIGKILL)  # it replied (or failed): nothing of it is still wanted (nor reaped yet)
            os.waitpid(pid, 0)
            self._remove_dir(tmpdir)

    def _relay(self, channel: tuple[int, int], held: int) -> tuple[int, float]:
        """Read the child's call pipe into ``self.calls``; relay each complete line to the parent and
        its answer back. ``(bytes held, seconds waited on the parent)``; ``held`` -1 at EOF;
        ``OverflowError`` / ``BlockingIOError`` for a child to kill."""
        if held == len(self.calls):
            raise OverflowError(f"a call longer than {len(self.calls)} bytes")
        with memoryview(self.calls) as view:
            n = os.readv(channel[0], [view[held:]])
        held, started = held + n, time.monotonic()
        while (end := self.calls.find(b"\n", 0, held) + 1) > 0:
            self._send(self.calls, end, outcome=None, call=True)
            self.calls.move(0, end, held - end)
            held -= end
            size, _ = self._receive()  # the answer: at most MAX_CALL_BYTES, which an empty pipe holds
            with memoryview(self.inbox) as view:
                _write_all(channel[1], view[:size])
        return (held if n else -1), time.monotonic() - started

    def _collect(self, r: int, pid: int, channel: tuple[int, int] | None) -> tuple[int, tuple[str, str] | None]:
        """How many bytes of reply the child wrote into ``self.reply``, and ``(status,
        message)`` when it did not finish properly (the child is then reaped here; after a
        complete reply it is left to :meth:`reap`). ``channel``: the services' pipes to relay."""
        cfg = self.config
        deadline = time.monotonic() + cfg["timeout"]
        got, held, outcome = 0, 0, ("timeout", f"wall-clock limit of {cfg['timeout']:g} s exceeded")
        poller = select.poll()
        for fd in (r, *(channel or ())[:1]):
            poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while (remaining := deadline - time.monotonic()) > 0:
            ready = dict(poller.poll(max(1, math.ceil(remaining * 1000))))
            if channel is not None and channel[0] in ready:
                try:
                    held, waited = self._relay(channel, held)
                except (OverflowError, BlockingIOError) as exc:
                    outcome = ("killed", f"services: {exc}" if isinstance(exc, OverflowError)
                               else "services: the program left its answers unread")
                    break
                deadline += waited
                if held < 0:  # the child closed its call pipe
                    poller.unregister(channel[0])
                    channel = None
            if r not in ready:
                continue
            if got == len(self.reply):
                outcome = ("killed", f"reply longer than {len(self.reply)} bytes")
                break
            with memoryview(self.reply) as view:
                n = os.readv(r, [view[got:]])
            if n == 0:  # the child closed its end: its reply (if any) is complete
                outcome = None
                break
            got += n
        if outcome is None and got and self.reply[got - 1] == 10:
            return got, None  # a complete reply (one line or not: the parent checks)
        os.kill(pid, signal.SIGKILL)  # not reaped yet: it exists, if only as a zombie
        rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        if outcome is None and rc == -signal.SIGXCPU:  # the child exited or died without a complete reply
            outcome = ("timeout", f"CPU time limit of {cfg['cpu_seconds']:g} s exceeded")
        elif outcome is None and rc < 0:
            outcome = ("killed", f"program killed by signal {signal_name(-rc)}")
        elif outcome is None:
            outcome = ("killed", f"program exited with code {rc}" if rc else "the program exited without a reply")
        return 0, outcome

    def _receive(self) -> tuple[int, bool]:
        """The parent's next frame into ``self.inbox``: ``(size, services bit)``; exits at EOF."""
        header = bytearray(4)
        if not _read_exact(self.req_fd, memoryview(header)):
            os._exit(0)
        word = int.from_bytes(header, "big")
        size = word & ~SERVICES_BIT
        with memoryview(self.inbox) as view:
            if size > len(view) or not _read_exact(self.req_fd, view[:size]):
                os._exit(3)  # the parent broke the protocol: nothing here can be trusted
        return size, bool(word & SERVICES_BIT)

    def serve(self) -> None:
        while True:
            self.reap()  # idle: no child may outlive the batch it belongs to
            size, services = self._receive()
            with memoryview(self.inbox) as view:
                self.request = bytearray(view[:size])
            self.run_item(size, services)


def _worker_main(config_json: str) -> None:  # pragma: no cover - runs in the subprocess
    # Keep the protocol on private descriptors; fds 0-2 become /dev/null so that code writing
    # to "stdout" at the OS level cannot touch the protocol.
    req_fd, resp_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
    zygote = _Zygote(json.loads(config_json), req_fd, resp_fd)
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
