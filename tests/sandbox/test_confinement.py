"""The sandbox's boundary is the kernel: hostile programs fail only their own item, in bounded
time, the batch completes, and the host is untouched.

Every hostile program runs twice: once as users run it (audit hook on) and once with the audit
hook switched off, so each check shows that Landlock, the unprivileged uid, the rlimits and the
network namespace hold on their own. Where bubblewrap is installed, a third configuration runs
the fork servers inside it.
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from findbench.sandbox import (
    ALLOW_UNCONFINED_ENV,
    Sandbox,
    SandboxLimits,
    SandboxUnavailableError,
    run_functions,
    seccomp_program,
)

IDENTITY = "def f(x):\n    return x\n"
CONFIGS = ["audit_hook", "kernel_only"] + (["bwrap_kernel_only"] if shutil.which("bwrap") else [])


@pytest.fixture(scope="module", params=CONFIGS)
def box(request):
    kernel_only = request.param != "audit_hook"
    limits = SandboxLimits(workers=2, timeout=6.0, cpu_seconds=3, memory_mb=768, max_output_bytes=1000)
    with Sandbox(limits, bwrap=request.param.startswith("bwrap")) as sandbox:
        sandbox.config["audit_hook"] = not kernel_only
        sandbox.kernel_only = kernel_only
        yield sandbox


@pytest.fixture()
def victim(tmp_path):
    """A folder and a secret outside the sandbox, readable and writable by anyone (so only the
    sandbox's own layers stand between a program and them)."""
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "secret.txt").write_text("the secret")
    (folder / "keep.txt").write_text("keep me")
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.txt").write_text("deep")
    for path in (tmp_path, folder, folder / "sub"):
        path.chmod(0o777)
    for path in (folder / "secret.txt", folder / "keep.txt", folder / "sub" / "deep.txt"):
        path.chmod(0o666)
    return folder


def _snapshot(folder) -> dict:
    return {str(p.relative_to(folder)): (p.read_text() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def _run_hostile(box, programs: dict[str, str]) -> dict:
    """Run each hostile program between two benign ones; the benign ones must be exact."""
    codes, names = [], []
    for name, code in programs.items():
        codes += [code, "def g(x):\n    return 2 * x\n"]
        names += [name, "benign"]
    results = box.run(codes, [[1.0]] * len(codes))
    by_name = {}
    for name, res in zip(names, results):
        if name == "benign":
            assert res.status == "ok" and res.values == [2.0], res
        else:
            by_name[name] = res
    return by_name


def _failed(res) -> bool:
    """The program got nothing: it did not load, or its call raised."""
    return res.status != "ok" or res.errors[0] is not None


def test_file_system_attacks_leave_the_host_untouched(box, victim):
    before = _snapshot(victim)
    home = os.path.expanduser("~")
    v, secret = str(victim), str(victim / "secret.txt")
    programs = {
        "dir_fd_unlink": f"import os\nfd = os.open({v!r}, os.O_PATH)\nos.unlink('keep.txt', dir_fd=fd)\n" + IDENTITY,
        "dir_fd_create": (
            f"import os\nfd = os.open({v!r}, os.O_PATH)\nos.open('new.txt', os.O_WRONLY | os.O_CREAT, dir_fd=fd)\n"
        )
        + IDENTITY,
        "dir_fd_rename": (
            f"import os\nfd = os.open({v!r}, os.O_PATH)\n"
            "os.rename('keep.txt', 'moved.txt', src_dir_fd=fd, dst_dir_fd=fd)\n"
        )
        + IDENTITY,
        "dir_fd_read": (
            f"import os\nfd = os.open({v!r}, os.O_PATH)\ndef f(x):\n"
            "    return os.read(os.open('secret.txt', os.O_RDONLY, dir_fd=fd), 100).decode()\n"
        ),
        "absolute_write": f"open({v + '/new.txt'!r}, 'w').write('x')\n" + IDENTITY,
        "absolute_unlink": f"import os\nos.unlink({v + '/keep.txt'!r})\n" + IDENTITY,
        "absolute_rename": f"import os\nos.rename({v + '/keep.txt'!r}, {v + '/moved.txt'!r})\n" + IDENTITY,
        "relative_write": (
            f"import os\nrel = os.path.relpath({v!r})\nopen(os.path.join(rel, 'new.txt'), 'w').write('x')\n"
        )
        + IDENTITY,
        "relative_unlink": f"import os\nos.unlink(os.path.join(os.path.relpath({v!r}), 'keep.txt'))\n" + IDENTITY,
        "symlink_read": f"import os\nos.symlink({secret!r}, 'link')\ndef f(x):\n    return open('link').read()\n",
        "symlink_write": f"import os\nos.symlink({v + '/keep.txt'!r}, 'link')\nopen('link', 'w').write('gone')\n"
        + IDENTITY,
        "symlink_dir": f"import os, shutil\nos.symlink({v!r}, 'dir')\nshutil.rmtree('dir/sub')\n" + IDENTITY,
        "hardlink": f"import os\nos.link({secret!r}, 'hard')\ndef f(x):\n    return open('hard').read()\n",
        "rmtree": f"import shutil\nshutil.rmtree({v!r})\n" + IDENTITY,
        "read_secret": f"def f(x):\n    return open({secret!r}).read()\n",
        "list_home": f"import os\ndef f(x):\n    return os.listdir({home!r})\n",
        "read_etc": "def f(x):\n    return open('/etc/passwd').read()\n",
        "audit_tamper_then_write": (
            "import sys\nsys.audit = lambda *a: None\nsys.addaudithook(lambda *a: None)\n"
            f"open({v + '/new.txt'!r}, 'w').write('x')\n" + IDENTITY
        ),
        "write_site_packages": (
            "import os, numpy\nopen(os.path.join(os.path.dirname(numpy.__file__), 'pwned.py'), 'w').write('x')\n"
        )
        + IDENTITY,
    }
    if box.kernel_only:  # without the hook ctypes imports; the kernel must still say no
        programs["ctypes_unlink"] = (
            f"import ctypes\nctypes.CDLL(None).unlink({(v + '/keep.txt').encode()!r})\n" + IDENTITY
        )
        programs["ctypes_system"] = (
            f"import ctypes\nctypes.CDLL(None).system({('touch ' + v + '/system.txt').encode()!r})\n" + IDENTITY
        )
        programs["ctypes_syscall_unlinkat"] = (
            f"import ctypes, os\nfd = os.open({v!r}, os.O_PATH)\n"
            "ctypes.CDLL(None).syscall(263, fd, b'keep.txt', 0)\n" + IDENTITY  # 263: unlinkat on x86-64
        )
    else:
        programs["ctypes_import"] = (
            f"import ctypes\nctypes.CDLL(None).unlink({(v + '/keep.txt').encode()!r})\n" + IDENTITY
        )
    results = _run_hostile(box, programs)
    for name, res in results.items():
        if name.startswith("ctypes") and box.kernel_only:
            continue  # libc calls return -1 instead of raising; the snapshot below is the check
        assert _failed(res), (name, res)
        assert "the secret" not in repr(res.values), name
    assert results["list_home"].values == [None]
    assert _snapshot(victim) == before
    assert not (Path(np.__file__).parent / "pwned.py").exists()


def test_monkeypatching_does_not_reach_the_next_program(box):
    patch = (
        "import math, numpy, builtins, sys, random\n"
        "math.sin = lambda x: 0.0\nnumpy.sin = lambda x: 0.0\nbuiltins.abs = lambda x: -1\n"
        "random.random = lambda: 0.5\nsys.modules['json'] = None\n" + IDENTITY
    )
    clean = (
        "import math, numpy, random, json\n"
        "def f(x):\n    return [math.sin(x), float(numpy.sin(x)), abs(-x), json.dumps(x)]\n"
    )
    results = box.run([patch, clean] * 4, [[0.5]] * 8)
    expected = [math.sin(0.5), float(np.sin(0.5)), 0.5, "0.5"]
    for res in results[1::2]:
        assert res.status == "ok" and res.values == [expected]


def test_processes_signals_and_network_fail_only_their_item(box):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    me = os.getpid()
    programs = {
        "kill_test_process": f"import os, signal\nos.kill({me}, signal.SIGTERM)\n" + IDENTITY,
        "kill_parent": "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + IDENTITY,
        "kill_all": "import os, signal\nos.kill(-1, signal.SIGKILL)\n" + IDENTITY,
        "fork": "import os\ndef f(x):\n    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n    return pid\n",
        "thread": "import threading\nt = threading.Thread(target=print)\nt.start()\nt.join()\n" + IDENTITY,
        "subprocess": "import subprocess\nsubprocess.run(['true'])\n" + IDENTITY,
        "socket": (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hi')\n" + IDENTITY
        ),
    }
    results = _run_hostile(box, programs)
    try:
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    for name, res in results.items():
        assert res.status != "timeout", (name, res)
    # signals to the test process and to the fork server are refused (audit hook, else the
    # unprivileged uid / Landlock's signal scope; under bwrap the test process is not even visible)
    for name in ("kill_test_process", "kill_parent"):
        assert results[name].status == "error", (name, results[name])
        assert any(e in results[name].message for e in ("PermissionError", "ProcessLookupError")), results[name]
    # kill(-1) skips processes it may not signal and reports success if it saw any: what
    # matters is that this test process and the fork servers are still here (checked below)
    for name in ("fork", "thread", "subprocess", "socket"):
        assert _failed(results[name]), (name, results[name])
    # the pool's fork servers survived the signals and still answer
    assert box.run([IDENTITY], [[3]])[0].values == [3]


def test_resource_attacks_are_bounded(box):
    programs = {
        "loop": "while True:\n    pass\n",
        "loop_in_call": "def f(x):\n    while True:\n        x += 1\n",
        "memory": (
            "import numpy as np\nblocks = []\nwhile True:\n    blocks.append(np.empty(50 * 2**20, dtype=np.uint8))\n"
        ),
        "output": "print('x' * 100_000_000)\n" + IDENTITY,
        "big_file": "open('big', 'wb').write(b'x' * (64 * 2**20))\n" + IDENTITY,
        "nan_inf": "def f(x):\n    return [float('nan'), float('inf'), -float('inf')]\n",
        "syntax": "def f(x)\n    return x\n",
        "exit": "import os\nos._exit(3)\n",
        "segfault": "import os, signal\nos.abort()\n",
    }
    start = time.monotonic()
    results = _run_hostile(box, programs)
    assert time.monotonic() - start < 60
    assert results["loop"].status == "timeout"
    assert results["loop_in_call"].status == "timeout"
    assert results["memory"].status == "error" and "MemoryError" in results["memory"].message
    out = results["output"]
    assert out.status == "ok" and out.values == [1.0] and len(out.stdout) < 1100 and "truncated" in out.message
    assert _failed(results["big_file"])
    nan, inf, minf = results["nan_inf"].values[0]
    assert math.isnan(nan) and inf == math.inf and minf == -math.inf
    assert results["syntax"].status == "error" and "SyntaxError" in results["syntax"].message
    assert results["exit"].status == "killed" and "exited with code 3" in results["exit"].message
    assert results["segfault"].status == "killed" and "SIGABRT" in results["segfault"].message


def test_isolation_is_reported(box):
    [res] = box.run([IDENTITY], [[1]])
    level = box.isolation_level
    assert res.isolation == level
    assert "landlock" in level.split("+") and "netns" in level.split("+")
    if os.geteuid() == 0:
        assert "uid" in level.split("+")
    assert level.startswith("bwrap+") == box.isolation["bwrap"]
    assert box.isolation["landlock_abi"] >= 1 and box.isolation["no_new_privs"] is True


def test_no_kernel_boundary_refuses_unless_the_caller_opts_in(monkeypatch):
    monkeypatch.delenv(ALLOW_UNCONFINED_ENV, raising=False)
    # Landlock switched off and no bubblewrap: what an old kernel without either looks like.
    with pytest.raises(SandboxUnavailableError, match="Landlock.*bubblewrap.*allow_unconfined=True"):
        with Sandbox(SandboxLimits(workers=1), landlock=False, bwrap=False) as box:
            box.run([IDENTITY], [[1]])
    with Sandbox(SandboxLimits(workers=1), landlock=False, bwrap=False, allow_unconfined=True) as box:
        [res] = box.run([IDENTITY], [[1]])
    assert res.values == [1] and res.isolation.startswith("unconfined")
    monkeypatch.setenv(ALLOW_UNCONFINED_ENV, "1")
    with Sandbox(SandboxLimits(workers=1), landlock=False, bwrap=False) as box:
        [res] = box.run(["def f(x):\n    return open('/etc/passwd').read()[:4]\n"], [[1]])
    assert res.isolation.startswith("unconfined")
    assert res.status == "ok"  # no Landlock: the opted-in run really is unconfined for reads


def test_default_run_functions_is_confined():
    [res] = run_functions([IDENTITY], [[1]])
    assert res.values == [1] and "landlock" in res.isolation


NOBODY = 65534


def _metadata_attack(target: str) -> str:
    """A program that tries every call that changes a file's mode, owner, times or extended
    attributes (path, ``*at``, descriptor and raw-syscall forms) on ``target`` and on a file of
    its own; it returns ``{"<whose>:<call>": errno, or 0 when the call succeeded}``."""
    return textwrap.dedent(f"""
        import ctypes, fcntl, os, platform
        T = {target!r}
        libc = ctypes.CDLL(None, use_errno=True)
        VALUE = ctypes.c_char_p(b"1")
        XATTR_ARGS = (ctypes.c_uint64 * 2)(ctypes.cast(VALUE, ctypes.c_void_p).value, 1)  # value, size
        FILE_ATTR = (ctypes.c_uint64 * 3)()

        def attempt(call):
            try:
                call()
                return 0
            except OSError as exc:
                return exc.errno

        def raw(number, *args):
            if libc.syscall(number, *args) != 0:
                raise OSError(ctypes.get_errno(), "")

        def f(x):
            with open("own", "w") as fh:
                fh.write("x")
            fd = os.open("own", os.O_RDONLY)
            uid, gid = os.getuid(), os.getgid()
            out = {{}}
            for whose, path in (("caller", T), ("own", "own")):
                p = path.encode()
                calls = {{
                    "chmod": lambda: os.chmod(path, 0o777),
                    "chown": lambda: os.chown(path, uid, gid),
                    "lchown": lambda: os.lchown(path, uid, gid),
                    "utime": lambda: os.utime(path, (0, 0)),
                    "setxattr": lambda: os.setxattr(path, "user.pwned", b"1"),
                    "lsetxattr": lambda: os.setxattr(path, "user.pwned", b"1", follow_symlinks=False),
                    "removexattr": lambda: os.removexattr(path, "user.findbench"),
                    "fchmodat2": lambda: raw(452, -100, p, 0o777, 0),
                    "setxattrat": lambda: raw(463, -100, p, 0, b"user.pwned", XATTR_ARGS, 16),
                    "removexattrat": lambda: raw(466, -100, p, 0, b"user.findbench"),
                    "file_setattr": lambda: raw(469, -100, p, FILE_ATTR, 24, 0),
                }}
                if platform.machine() == "x86_64":  # the older calls, by their x86-64 numbers
                    calls.update({{
                        "sys_chmod": lambda: raw(90, p, 0o777),
                        "sys_fchmodat": lambda: raw(268, -100, p, 0o777),
                        "sys_chown": lambda: raw(92, p, uid, gid),
                        "sys_lchown": lambda: raw(94, p, uid, gid),
                        "sys_fchownat": lambda: raw(260, -100, p, uid, gid, 0),
                        "sys_utime": lambda: raw(132, p, None),
                        "sys_utimes": lambda: raw(235, p, None),
                        "sys_futimesat": lambda: raw(261, -100, p, None),
                        "sys_utimensat": lambda: raw(280, -100, p, None, 0),
                        "sys_setxattr": lambda: raw(188, p, b"user.pwned", b"1", 1, 0),
                        "sys_lsetxattr": lambda: raw(189, p, b"user.pwned", b"1", 1, 0),
                        "sys_removexattr": lambda: raw(197, p, b"user.findbench"),
                        "sys_lremovexattr": lambda: raw(198, p, b"user.findbench"),
                    }})
                out.update({{f"{{whose}}:{{name}}": attempt(call) for name, call in calls.items()}})
            for name, call in {{
                "fchmod": lambda: os.fchmod(fd, 0o777),
                "fchown": lambda: os.fchown(fd, uid, gid),
                "futimens": lambda: os.utime(fd, (0, 0)),
                "fsetxattr": lambda: os.setxattr(fd, "user.pwned", b"1"),
                "fremovexattr": lambda: os.removexattr(fd, "user.findbench"),
                "FS_IOC_SETFLAGS": lambda: fcntl.ioctl(fd, 0x40086602, bytes(8)),
                "FS_IOC_FSSETXATTR": lambda: fcntl.ioctl(fd, 0x401C5820, bytes(28)),
            }}.items():
                out[f"own:{{name}}"] = attempt(call)
            return out
    """)


def _file_state(path: str) -> tuple:
    st = os.stat(path)
    xattrs = {name: os.getxattr(path, name) for name in os.listxattr(path)}
    return st.st_mode, st.st_uid, st.st_gid, st.st_atime_ns, st.st_mtime_ns, st.st_ctime_ns, xattrs


def _caller_file(folder: str, owner: int | None) -> str:
    """A 0600 file with an extended attribute in ``folder``, owned by ``owner`` (when given)."""
    path = os.path.join(folder, "caller.txt")
    with open(path, "w") as fh:
        fh.write("the caller's")
    os.chmod(path, 0o600)
    try:
        os.setxattr(path, "user.findbench", b"kept")
    except OSError as exc:  # a file system without user xattrs: mode, owner and times remain
        if exc.errno != errno.ENOTSUP:
            raise
    if owner is not None:
        os.chown(path, owner, owner)
    return path


def _assert_every_call_refused(calls: dict, caller_errno: int | None = None) -> None:
    """Every attempt on the caller's file failed (with ``caller_errno`` when given), and every
    attempt on the program's own file was refused by seccomp."""
    caller = {name: err for name, err in calls.items() if name.startswith("caller:")}
    assert caller and all(err and caller_errno in (None, err) for err in caller.values()), caller
    own = {name: err for name, err in calls.items() if name.startswith("own:")}
    assert own and all(err == errno.EPERM for err in own.values()), own


@pytest.fixture()
def programs_uid_file():
    """A 0600 file owned by the uid programs run as (``nobody`` when the caller is root), in a
    folder that uid can enter: only the sandbox stands between a program and its metadata."""
    folder = tempfile.mkdtemp(prefix="findbench-metadata-")  # pytest's tmp_path is closed to other uids
    os.chmod(folder, 0o755)
    yield _caller_file(folder, NOBODY if os.geteuid() == 0 else None)
    shutil.rmtree(folder)


def test_no_program_changes_a_files_mode_owner_times_or_xattrs(box, programs_uid_file):
    before = _file_state(programs_uid_file)
    [res] = box.run([_metadata_attack(programs_uid_file)], [[0]])
    assert _file_state(programs_uid_file) == before
    if box.kernel_only:
        assert res.status == "ok" and res.errors == [None], res
        _assert_every_call_refused(res.values[0])  # EPERM, or ENOENT where bubblewrap hides the file
    else:  # the audit hook refuses ctypes: the program does not load
        assert res.status == "error" and "ctypes" in res.message, res
    assert box.isolation["file_metadata_locked"] is True


def test_no_metadata_boundary_refuses_unless_the_caller_opts_in(monkeypatch):
    monkeypatch.delenv(ALLOW_UNCONFINED_ENV, raising=False)
    # No seccomp filter (libseccomp missing) and no bubblewrap: Landlock alone leaves a file's
    # mode, owner, times and extended attributes to whoever owns it.
    with pytest.raises(SandboxUnavailableError, match="mode, owner, times and extended attributes.*allow_unconfined"):
        with Sandbox(SandboxLimits(workers=1), bwrap=False) as box:
            box.config["seccomp_bpf"] = None
            box.run([IDENTITY], [[1]])
    with Sandbox(SandboxLimits(workers=1), bwrap=False, allow_unconfined=True) as box:
        box.config["seccomp_bpf"] = None
        [res] = box.run([IDENTITY], [[1]])
    assert res.values == [1] and "seccomp" not in res.isolation.split("+")
    assert box.isolation["file_metadata_locked"] is False


# Run as root: show uid 65534 the folders it needs where a closed folder (``/root``, say) hides
# them (a private mount namespace with a tmpfs over that folder and the needed folders bound
# into it), then become uid/gid 65534 with no groups and no capabilities and exec the caller.
_AS_NOBODY = r"""
import ctypes, json, os, sys
hidden, argv, env = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
def need(ok, what):
    if not ok:
        print(json.dumps({"skip": f"{what} failed: {os.strerror(ctypes.get_errno())}"}), flush=True)
        sys.exit(0)
os.umask(0o022)
if hidden:
    need(libc.unshare(0x00020000) == 0, "unshare(CLONE_NEWNS)")
    need(libc.mount(None, b"/", None, ctypes.c_ulong(0x4000 | 0x40000), None) == 0, "making / private")
    for top, paths in hidden.items():
        fds = [os.open(p, os.O_PATH) for p in paths]
        need(libc.mount(b"tmpfs", top.encode(), b"tmpfs", ctypes.c_ulong(0), b"mode=0755") == 0, f"a tmpfs on {top}")
        for path, fd in zip(paths, fds):
            os.makedirs(path, exist_ok=True)
            source = f"/proc/self/fd/{fd}".encode()
            need(libc.mount(source, path.encode(), None, ctypes.c_ulong(0x1000 | 0x4000), None) == 0, f"binding {path}")
os.setgroups([])
os.setresgid(65534, 65534, 65534)
os.setresuid(65534, 65534, 65534)
os.execve(argv[0], argv, env)
"""
# What the non-root caller runs: the sandbox without bubblewrap, the audit hook off.
_NONROOT_CALLER = r"""
import json, os, sys
try:
    import numpy  # noqa: F401
except (ImportError, OSError) as exc:
    print(json.dumps({"skip": f"uid 65534 cannot import numpy from this environment: {exc}"}))
    sys.exit(0)
import findbench
from findbench.sandbox import Sandbox, SandboxLimits, SandboxUnavailableError
out = {"uid": os.geteuid(), "python": sys.version, "findbench": findbench.__file__}
try:
    with Sandbox(SandboxLimits(workers=1, timeout=60), bwrap=False) as box:
        box.config["audit_hook"] = False
        [res] = box.run([open(sys.argv[1]).read()], [[0]])
    out.update(isolation=box.isolation, level=res.isolation, status=res.status, values=res.values,
               errors=res.errors, message=res.message)
except SandboxUnavailableError as exc:
    out["refused"] = str(exc)
print(json.dumps(out))
"""


def _closed_folders(paths: set[str]) -> dict[str, list[str]]:
    """``{closed folder: [needed paths beneath it]}`` for the topmost folders above ``paths``
    that other users cannot enter."""
    hidden: dict[str, list[str]] = {}
    for path in sorted(paths):
        for parent in reversed(Path(path).parents):
            if not os.stat(parent).st_mode & 0o001:
                if str(parent) == "/":
                    pytest.skip("/ is closed to other users")
                beneath = hidden.setdefault(str(parent), [])
                if not any(path.startswith(p + os.sep) for p in beneath):
                    beneath.append(path)
                break
    return hidden


@pytest.mark.skipif(os.geteuid() != 0, reason="running as another user (uid 65534) needs root")
def test_a_non_root_callers_files_keep_their_metadata_without_bubblewrap():
    import findbench

    work = tempfile.mkdtemp(prefix="findbench-nonroot-")
    try:
        shutil.copytree(Path(findbench.__file__).parent, os.path.join(work, "src", "findbench"),
                        ignore=shutil.ignore_patterns("__pycache__", "data"))
        target = _caller_file(work, None)
        with open(os.path.join(work, "attack.py"), "w") as fh:
            fh.write(_metadata_attack(target))
        with open(os.path.join(work, "caller.py"), "w") as fh:
            fh.write(_NONROOT_CALLER)
        for root, dirs, files in os.walk(work):
            for name in [root, *(os.path.join(root, n) for n in dirs + files)]:
                os.lchown(name, NOBODY, NOBODY)
        os.chmod(work, 0o700)
        before = _file_state(target)
        needed = {os.path.realpath(p) for p in (sys.base_prefix, sys.base_exec_prefix, sys.prefix, work)}
        needed |= {os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))}
        needed.add(str(Path(np.__file__).resolve().parents[1]))  # the environment's site-packages
        env = {"PATH": "/usr/bin:/bin", "HOME": work, "TMPDIR": work, "LANG": "C.UTF-8",
               "PYTHONPATH": os.path.join(work, "src")}
        argv = [sys.executable, os.path.join(work, "caller.py"), os.path.join(work, "attack.py")]
        proc = subprocess.run([sys.executable, "-c", _AS_NOBODY, json.dumps([_closed_folders(needed), argv, env])],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        if "skip" in out:
            pytest.skip(out["skip"])
        assert out["uid"] == NOBODY and out["python"] == sys.version, out  # this interpreter, not another
        assert out["findbench"].startswith(work + os.sep), out
        if seccomp_program() is None:  # no libseccomp here: the caller must have been refused
            assert "mode, owner, times and extended attributes" in out.get("refused", ""), out
            return
        iso = out["isolation"]
        assert not iso["bwrap"] and iso["uid"] == NOBODY and iso["seccomp"] and iso["file_metadata_locked"], iso
        assert "seccomp" in out["level"].split("+") and "bwrap" not in out["level"].split("+")
        assert _file_state(target) == before
        assert out["status"] == "ok" and out["errors"] == [None], out
        _assert_every_call_refused(out["values"][0], errno.EPERM)
    finally:
        shutil.rmtree(work)
