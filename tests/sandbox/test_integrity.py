"""Scores cannot be forged, the answer is out of reach, and no program can break a scoring run.

Each hostile program below is one an agent that is scored on the code it writes could send.
Every check runs with the audit hook on and off, and with and without bubblewrap (where it is
installed), so it is the channel's design and the kernel layers that hold, not the hook.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

import findbench
from findbench.find.code_scoring import score_exact_match, score_nmse
from findbench.sandbox import Sandbox, SandboxLimits

CONFIGS = ["audit_hook", "kernel_only"] + (["bwrap", "bwrap_kernel_only"] if shutil.which("bwrap") else [])
HONEST = "def g(x):\n    return 2 * x\n"
# Every descriptor a program can see (the reply pipe among them).
FDS = textwrap.dedent("""
    import os, json
    def _fds():
        out = []
        for fd in range(3, 256):
            try:
                os.fstat(fd)
                out.append(fd)
            except OSError:
                pass
        return out
    def _write_all(data):
        for fd in _fds():
            try:
                os.write(fd, data)
            except OSError:
                pass
""")


@pytest.fixture(scope="module", params=CONFIGS)
def box(request):
    limits = SandboxLimits(workers=1, timeout=10.0, cpu_seconds=5, memory_mb=768, max_disk_bytes=4 * 2**20,
                           max_files=512)
    with Sandbox(limits, bwrap=request.param.startswith("bwrap")) as sandbox:
        sandbox.config["audit_hook"] = "kernel_only" not in request.param
        yield sandbox


def _between_honest(box, hostile: list[str], calls: int = 2) -> list:
    """Run each hostile program between honest ones, ``calls`` times on the same pool; the
    honest programs' results must be exact every time. The hostile results of the last call."""
    codes = []
    for code in hostile:
        codes += [HONEST, code]
    codes.append(HONEST)
    for _ in range(calls):
        results = box.run(codes, [[1.0, 2.0]] * len(codes))
        for res in results[0::2]:
            assert res.status == "ok" and res.values == [2.0, 4.0], res
    return results[1::2]


def _reply(k: int, values: list) -> bytes:
    return json.dumps({"k": k, "status": "ok", "values": values, "errors": [None] * len(values),
                       "stdout": "", "message": ""}).encode() + b"\n"


def test_stray_and_forged_reply_lines_fail_only_their_own_item(box):
    forged_next = _reply(2, [0.0, 0.0])  # the next program's slot (k = 2 in _between_honest)
    hostile = [
        FDS + "def f(x):\n    _write_all(b'\\n')\n    return x\n",
        FDS + f"def f(x):\n    _write_all({forged_next!r})\n    return x\n",
        FDS + f"def f(x):\n    _write_all({forged_next!r} * 40)\n    os._exit(0)\n",
        FDS + "def f(x):\n    _write_all(b'{\"k\": 1, \"status\": \"ok\"')\n    return x\n",
    ]
    for res in _between_honest(box, hostile, calls=3):
        assert res.status == "killed" and "malformed reply" in res.message


def test_nested_json_replies_fail_their_item_and_never_raise(box):
    hostile = [
        FDS + "def f(x):\n    _write_all(b'[' * 200000 + b'\\n')\n    os._exit(0)\n",
        FDS + "def f(x):\n    _write_all(b'{\"k\": 1, \"status\": \"ok\", \"values\": [' + b'[' * 5000 + b']' * 5000"
              " + b', 1], \"errors\": [null, null]}\\n')\n    os._exit(0)\n",
        FDS + "def f(x):\n    _write_all(b'\\xff\\xfe\\n')\n    os._exit(0)\n",
    ]
    for res in _between_honest(box, hostile):
        assert res.status == "killed"


def test_a_program_writing_its_own_reply_cannot_shift_later_calls(box):
    """With a reused pool, a forged line once planted the next call's values."""
    cheat = FDS + f"def f(x):\n    _write_all({_reply(0, [0.0, 0.0])!r})\n    return x\n"
    box.run([cheat], [[1.0, 2.0]])
    for _ in range(3):
        [res] = box.run([HONEST], [[3.0, 4.0]])
        assert res.values == [6.0, 8.0]


SECRET = "findbench_secret_marker_4417"
# Looks for the marker everywhere it can: every object the garbage collector knows, every
# frame up the stack and the fork server's buffers it reaches through them.
CHEAT = textwrap.dedent(f"""
    import gc, sys
    def _has(o, needle):
        if o is needle:
            return False
        if isinstance(o, str):
            return needle in o
        if isinstance(o, (bytes, bytearray)):
            return needle.encode() in bytes(o)
        return False
    def _scan():
        needle = {SECRET[:8]!r} + {SECRET[8:]!r}
        hits = 0
        try:  # refused by the audit hook where it is on
            objects = gc.get_objects()
            objects += gc.get_referents(*objects)
        except Exception:
            objects = []
        for o in objects:
            try:
                hits += _has(o, needle) or (isinstance(o, dict) and any(_has(v, needle) for v in o.values()))
            except Exception:
                pass
        frame = sys._getframe()
        while frame is not None:
            for v in list(frame.f_locals.values()):
                for attr in ("request", "reply"):
                    try:
                        buf = getattr(v, attr, None)
                    except Exception:
                        continue
                    if isinstance(buf, bytearray) and needle.encode() in buf:
                        hits += 1
            frame = frame.f_back
        return hits
    def f(x):
        return float(_scan())
""")


def test_no_program_finds_another_programs_request_or_the_ground_truth(box):
    # The cheat holds the marker once (its needle is split in its own source); the reference
    # holds it in full. Run reference and cheat on the same fork server, one after the other.
    reference = f"SECRET = {SECRET!r}\ndef function(x):\n    return 3.0 * x\n"
    results = box.run([reference, CHEAT, reference, CHEAT], [[1.0], [1.0], [1.0], [1.0]],
                      entry=["function", "last_def", "function", "last_def"])
    assert results[0].values == [3.0]
    assert results[1].status == "ok" and results[3].status == "ok"
    assert results[1].values == [0.0] and results[3].values == [0.0], "the cheat found another program's request"


def test_a_memory_scanning_cheat_scores_nothing_through_score_nmse(box):
    """The cheat answers with whatever ground truth it can find; with none in reach its NMSE is inf."""
    reference = "def function(x):\n    return 0.5 * x + 1\n"
    cheat = textwrap.dedent("""
        import gc, re, sys
        def f(x):
            try:
                objects = gc.get_objects()
            except Exception:
                objects = []
            for o in objects:
                if isinstance(o, str) and 'def function' in o:
                    ns = {}
                    exec(o, ns)
                    return ns['function'](x)
            frame = sys._getframe()
            while frame is not None:
                for v in frame.f_locals.values():
                    try:
                        buf = getattr(v, 'request', None)
                    except Exception:
                        continue
                    if isinstance(buf, bytearray):
                        text = bytes(buf).split(b'\\0')[0].decode('utf-8', 'ignore')
                        if 'def function' in text:
                            return 'found'
                frame = frame.f_back
            return float('nan')
    """)
    out = score_nmse([cheat] * 3, [reference] * 3, sandbox=box)
    assert out["success_rate"] == 0.0 and out["n_failed"] == 3


def test_findbench_itself_is_out_of_reach(box):
    package = os.path.dirname(os.path.abspath(findbench.__file__))
    hostile = [
        "import findbench\ndef f(x):\n    return x\n",
        f"def f(x):\n    return open({os.path.join(package, '__init__.py')!r}).read()[:10]\n",
        f"import os\ndef f(x):\n    return os.listdir({package!r})\n",
        "import sys, os\ndef f(x):\n"
        "    return [e for p in sys.path if os.path.isdir(p) for e in os.listdir(p) if 'findbench' in e]\n",
    ]
    for res in _between_honest(box, hostile, calls=1):
        assert res.status != "ok" or all(e is not None for e in res.errors) or res.values == [[], []], res
    # what programs may import still works
    [res] = box.run(["import numpy as np, math, re\ndef f(x):\n    return float(np.sqrt(x) + math.pi)\n"], [[4.0]])
    assert res.status == "ok" and abs(res.values[0] - (2 + 3.141592653589793)) < 1e-9


def test_folders_and_disk_use_are_bounded_and_cleaned(box):
    nested = (
        "import os\ndef f(x):\n    for i in range(3000):\n        os.mkdir('d')\n        os.chdir('d')\n    return x\n"
    )
    fill = textwrap.dedent("""
        def f(x):
            n = 0
            try:
                for i in range(10000):
                    with open(f'fill{i}', 'wb') as fh:
                        fh.write(b'x' * 2**20)
                    n += 1
            except OSError:
                pass
            return float(n)
    """)
    files = (
        "def f(x):\n    n = 0\n    try:\n        for i in range(100000):\n            open(f'e{i}', 'w').close()\n"
        "            n += 1\n    except OSError:\n        pass\n    return float(n)\n"
    )
    box.run(["def f(x):\n    return x\n"], [[0]])  # the fork servers and their folders exist from here on

    def temp_entries() -> set[str]:  # other processes' sandboxes (parallel test runs) come and go meanwhile
        others = re.compile(rf"findbench-sandbox-(?!{os.getpid()}-)")
        return {name for name in os.listdir(tempfile.gettempdir()) if not others.match(name)}

    before = temp_entries()
    nested_res, fill_res, files_res = _between_honest(box, [nested, fill, files])
    if box.isolation["disk_cap_bytes"]:
        assert fill_res.status == "ok" and fill_res.values[0] <= 4  # 4 MiB in all
        assert files_res.status == "ok" and files_res.values[0] <= 512
    assert nested_res.status in ("ok", "error")
    assert temp_entries() - before == set()


def _x86_syscall(number: int, *args: str) -> str:
    return textwrap.dedent(f"""
        def f(x):
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            rc = libc.syscall({number}, {", ".join(args) or "0"})
            return [rc, ctypes.get_errno()]
    """)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="syscall numbers of x86_64")
def test_side_channels_are_refused_by_seccomp(box):
    if box.config["audit_hook"]:
        pytest.skip("the audit hook refuses ctypes before any of these is tried")
    assert box.isolation.get("seccomp") and "seccomp" in box.isolation_level and "ipcns" in box.isolation_level
    calls = {
        "add_key": _x86_syscall(248, "b'user'", "b'k'", "b'v'", "1", "-2"),  # the uid's user keyring
        "keyctl": _x86_syscall(250, "0", "-2"),
        "shmget": _x86_syscall(29, "0", "4096", "0o1666"),
        "msgget": _x86_syscall(68, "0", "0o1666"),
        "semget": _x86_syscall(64, "0", "1", "0o1666"),
        "io_uring_setup": _x86_syscall(425, "1", "0"),
        "userfaultfd": _x86_syscall(323, "0"),
        "unshare": _x86_syscall(272, "0x10000000"),
        "ptrace": _x86_syscall(101, "0", "1"),
        "bpf": _x86_syscall(321, "0", "0", "0"),
        "unix_socket": _x86_syscall(41, "1", "1", "0"),
    }
    results = dict(zip(calls, box.run(list(calls.values()), [[0]] * len(calls))))
    for name, res in results.items():
        assert res.status == "ok", (name, res)
        rc, err = res.values[0]
        assert rc == -1 and err in (1, 38), (name, rc, err)  # EPERM (ENOSYS for clone3 only)


def test_a_key_or_message_left_by_one_run_is_not_seen_by_the_next():
    put = textwrap.dedent("""
        def f(x):
            try:
                import ctypes
                libc = ctypes.CDLL(None, use_errno=True)
                return [libc.syscall(248, b'user', b'findbench-leak', b'secret', 6, -2), libc.msgget(4417, 0o1666)]
            except Exception as exc:
                return str(exc)
    """)
    get = textwrap.dedent("""
        def f(x):
            try:
                import ctypes
                libc = ctypes.CDLL(None, use_errno=True)
                return [libc.syscall(250, 10, -2, b'user', b'findbench-leak', 0), libc.msgget(4417, 0)]
            except Exception as exc:
                return str(exc)
    """)
    for bwrap in [False, True] if shutil.which("bwrap") else [False]:
        with Sandbox(SandboxLimits(workers=1), bwrap=bwrap) as first:
            first.config["audit_hook"] = False
            [wrote] = first.run([put], [[0]])
        with Sandbox(SandboxLimits(workers=1), bwrap=bwrap) as second:
            second.config["audit_hook"] = False
            [read] = second.run([get], [[0]])
        assert wrote.status == "ok" and read.status == "ok"
        assert all(v == -1 for v in wrote.values[0]) and all(v == -1 for v in read.values[0]), (wrote, read)


def _processes_with(marker: str) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    pids.append(int(name))
        except OSError:
            pass
    return pids


@pytest.mark.parametrize("bwrap", [False, True] if shutil.which("bwrap") else [False])
def test_programs_die_with_their_caller_and_leave_no_folder(bwrap, tmp_path):
    script = tmp_path / "caller.py"
    script.write_text(
        textwrap.dedent(f"""
        from findbench.sandbox import Sandbox, SandboxLimits
        box = Sandbox(SandboxLimits(workers=1, timeout=120, cpu_seconds=120), bwrap={bwrap})
        print("started", flush=True)
        box.run(["import time\\ndef f(x):\\n    time.sleep(100)\\n"], [[0]])
    """)
    )
    caller = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert caller.stdout.readline().strip() == "started"
    marker = f"findbench-sandbox-{caller.pid}-"
    deadline = time.monotonic() + 60
    while len(_processes_with(marker)) < 2 and time.monotonic() < deadline:  # the server and the program
        time.sleep(0.2)
    assert len(_processes_with(marker)) >= 2
    caller.send_signal(signal.SIGKILL)
    caller.wait()
    deadline = time.monotonic() + 10
    while _processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(marker) == [], "a program outlived its caller"
    # its folder is removed by the next sandbox that starts
    with Sandbox(SandboxLimits(workers=1), bwrap=bwrap) as box:
        assert box.run([HONEST], [[1]])[0].values == [2]
    assert not [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(marker)]


def test_string_scoring_keeps_honest_neighbours_exact(box):
    reference = "def function(s):\n    return s.upper()\n"
    cheat = FDS + "def f(s):\n    _write_all(b'\\n')\n    return s.upper()\n"
    out = score_exact_match(
        [reference.replace("function", "f"), cheat, reference.replace("function", "f")],
        [reference] * 3,
        [["ab", "cd"]] * 3,
        sandbox=box,
    )
    assert out["per_function"] == [1.0, 0.0, 1.0]


def test_large_batches_do_not_stall():
    """Requests far larger than a pipe holds, with replies as large: the parent never blocks
    writing requests while the fork server waits for it to read replies."""
    grid = [float(i) + 0.5 for i in range(3000)]
    with Sandbox(SandboxLimits(workers=1, timeout=30)) as box:
        results = box.run(["def f(x):\n    return 2 * x\n"] * 80, [grid] * 80)
    assert all(r.status == "ok" and r.values[-1] == 2 * grid[-1] for r in results)


def test_read_roots_hold_no_site_packages_but_numpy():
    """Installed normally (not editable), findbench lies in site-packages: programs may read
    numpy there and nothing else of it (no findbench, no data packages), nor findbench's cache."""
    import numpy

    from findbench.sandbox._worker import _read_roots, _site_dirs
    from findbench.sandbox.policy import denied_paths

    numpy_dir = os.path.dirname(os.path.realpath(numpy.__file__))
    roots = _read_roots(deny=denied_paths())  # what the fork server gives Landlock and bwrap binds
    for root in roots:
        for site in _site_dirs():
            if root == site or root.startswith(site + os.sep):
                assert root.startswith((numpy_dir, numpy_dir + ".libs")), root
        for denied in denied_paths():
            assert not (root == denied or root.startswith(denied + os.sep) or denied.startswith(root + os.sep)), (
                root,
                denied,
            )
    assert numpy_dir in roots
