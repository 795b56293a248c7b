"""findbench.sandbox: hostile code fails only its own item, in bounded time."""

from __future__ import annotations

import math
import os
import socket
import time

import pytest

from findbench.sandbox import (
    REASON_CHARS,
    STATUSES,
    Sandbox,
    SandboxLimits,
    SandboxResult,
    run_functions,
    short_reason,
)

IDENTITY = "def f(x):\n    return x\n"


@pytest.fixture(scope="module")
def box():
    with Sandbox(SandboxLimits(workers=2, timeout=4.0, cpu_seconds=1, memory_mb=768, max_output_bytes=1000)) as box:
        yield box


def test_hostile_batch_completes_and_fails_only_hostile_items(box, tmp_path):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    outside = tmp_path / "escaped.txt"
    hostile = {
        "loop": "while True:\n    pass\n",
        "loop_in_call": "def f(x):\n    while True:\n        x += 1\n",
        "memory": (
            "import numpy as np\nblocks = []\nwhile True:\n    blocks.append(np.empty(50 * 2**20, dtype=np.uint8))\n"
        ),
        "system": "import os\nos.system('touch /tmp/findbench-sandbox-pwned')\n" + IDENTITY,
        "write_system": "open('/etc/findbench-sandbox-test', 'w').write('x')\n" + IDENTITY,
        "write_outside": f"open({str(outside)!r}, 'w').write('x')\n" + IDENTITY,
        "socket": (
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hi')\n" + IDENTITY
        ),
        "fork": "import os\ndef f(x):\n    pid = os.fork()\n    return pid\n",
        "subprocess": "import subprocess\nsubprocess.run(['true'])\n" + IDENTITY,
        "print": "print('x' * 100_000_000)\n" + IDENTITY,
        "exit": "import os\nos._exit(3)\n",
        "nan": "def f(x):\n    return float('nan')\n",
    }
    codes, names = [], []
    for name, code in hostile.items():  # a benign program between every two hostile ones
        codes += [code, "def g(x):\n    return 2 * x\n"]
        names += [name, "benign"]
    start = time.monotonic()
    results = box.run(codes, [[1.0, 2.0]] * len(codes))
    elapsed = time.monotonic() - start
    listener_got = None
    try:
        listener_got = listener.accept()
    except BlockingIOError:
        pass
    finally:
        listener.close()

    assert len(results) == len(codes)
    by_name = {}
    for name, res in zip(names, results):
        assert isinstance(res, SandboxResult) and res.status in STATUSES
        if name == "benign":
            assert res.status == "ok" and res.values == [2.0, 4.0] and res.errors == [None, None], res
        else:
            by_name[name] = res
    # Bounded time: two timeouts of <= 4 s each plus worker restarts, far below a stuck batch.
    assert elapsed < 40
    assert by_name["loop"].status == "timeout"
    assert by_name["loop_in_call"].status == "timeout"
    assert by_name["memory"].status == "error" and "MemoryError" in by_name["memory"].message
    for name in ("system", "write_system", "write_outside", "socket", "subprocess"):
        res = by_name[name]
        assert res.status == "error" and not res.ok, (name, res)
        assert res.values == [None, None]
    assert "PermissionError" in by_name["system"].message
    assert "PermissionError" in by_name["write_system"].message
    assert by_name["fork"].status == "ok" and by_name["fork"].values == [None, None]
    assert all("os.fork" in e for e in by_name["fork"].errors)
    assert by_name["exit"].status == "killed"
    assert by_name["print"].status == "ok" and by_name["print"].values == [1.0, 2.0]
    assert len(by_name["print"].stdout) < 1100 and "characters dropped" in by_name["print"].stdout
    assert "truncated" in by_name["print"].message
    assert all(math.isnan(v) for v in by_name["nan"].values)
    # Nothing escaped.
    assert not outside.exists()
    assert not os.path.exists("/etc/findbench-sandbox-test")
    assert not os.path.exists("/tmp/findbench-sandbox-pwned")
    assert listener_got is None


def test_last_top_level_def_is_the_entry(box):
    code = (
        "def helper(x):\n    return x + 100\n"
        "class K:\n    def method(self, x):\n        return -1\n"
        "if True:\n    def hidden(x):\n        return -2\n"
        "def interpretation(x):\n"
        "    def inner(y):\n        return -3\n"
        "    return helper(x) * 2\n"
        "answer = 42\n"
    )
    [res] = box.run([code], [[1, 2]])
    assert res.status == "ok" and res.values == [202, 204]
    # By name instead.
    [res] = box.run([code], [[1]], entry="helper")
    assert res.values == [101]
    [res] = box.run(["x = 1\n"], [[1]])
    assert res.status == "error" and "no top-level function" in res.message
    [res] = box.run([code], [[1]], entry="missing")
    assert res.status == "error" and "'missing'" in res.message


def test_per_input_errors_and_data_passing(box):
    code = "def f(s):\n    if s == 'boom':\n        raise ValueError('no')\n    return s[::-1]\n"
    tricky = ['it\'s "quoted"', "boom", "back\\slash\nnewline", "')); import os; os._exit(1) #"]
    [res] = box.run([code], [tricky])
    assert res.status == "ok" and not res.ok
    assert res.values == [s[::-1] for s in tricky[:1]] + [None] + [s[::-1] for s in tricky[2:]]
    assert res.errors[1] == "ValueError: no" and res.errors[0] is None and res.errors[3] is None


def test_values_are_plain_json(box):
    code = (
        "import numpy as np\n"
        "def f(x):\n"
        "    if x == 0:\n        return np.float32(1.5)\n"
        "    if x == 1:\n        return (1, 'a', None)\n"
        "    if x == 2:\n        return np.arange(3)\n"
        "    if x == 3:\n        return complex(1, 2)\n"
        "    return {'k': np.int64(7)}\n"
    )
    [res] = box.run([code], [[0, 1, 2, 3, 4]])
    assert res.values == [1.5, [1, "a", None], [0, 1, 2], None, {"k": 7}]
    assert "complex" in res.errors[3]


def test_seeded_noise_is_deterministic_across_workers_and_calls(box):
    code = "import numpy as np, random\ndef f(x):\n    return x + np.random.normal() + random.random()\n"
    first = box.run([code] * 6, [[0.0, 1.0]] * 6)
    again = box.run([code], [[0.0, 1.0]])
    assert all(r.values == first[0].values for r in first + again)
    assert first[0].values[0] != first[0].values[1] - 1.0  # two draws, not one


def test_programs_do_not_share_files_or_threads(box):
    writer = "open('note.txt', 'w').write('secret')\ndef f(x):\n    return open('note.txt').read()\n"
    reader = "def f(x):\n    return open('note.txt').read()\n"
    threads = (
        "import threading, time\nthreading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n" + IDENTITY
    )
    results = box.run([writer, threads, reader], [[0]] * 3)
    assert results[0].values == ["secret"]
    if box.isolation["nproc_enforced"]:  # RLIMIT_NPROC=0 forbids threads outright
        assert results[1].status == "error" and "thread" in results[1].message
    else:  # the worker that ran it is replaced, so the thread cannot touch later programs
        assert results[1].status == "ok" and results[1].values == [0]
    assert results[2].status == "ok" and "FileNotFoundError" in results[2].errors[0]


def test_isolation_report(box):
    box.run([IDENTITY], [[1]])
    iso = box.isolation
    assert iso["audit_hook"] is True
    assert iso["rlimits"]["RLIMIT_AS"] == 768 * 2**20
    assert "network_namespace" in iso and "uid" in iso


def test_run_functions_one_shot_and_closed_sandbox():
    res = run_functions([IDENTITY, "def f(x):\n    return x * 3\n"], [[1], [2, 3]], limits=SandboxLimits(workers=1))
    assert [r.values for r in res] == [[1], [6, 9]]
    assert run_functions([], []) == []
    box = Sandbox(SandboxLimits(workers=1))
    box.close()
    with pytest.raises(RuntimeError, match="closed"):
        box.run([IDENTITY], [[1]])


@pytest.mark.parametrize(
    ("kwargs", "exc", "field"),
    [
        ({"codes": [IDENTITY], "inputs": [[1], [2]]}, ValueError, "inputs"),
        ({"codes": [3], "inputs": [[1]]}, TypeError, r"codes\[0\]"),
        ({"codes": IDENTITY, "inputs": [[1]]}, TypeError, "codes"),
        ({"codes": [IDENTITY], "inputs": ["abc"]}, TypeError, r"inputs\[0\]"),
        ({"codes": [IDENTITY], "inputs": [[object()]]}, TypeError, r"inputs\[0\]"),
        ({"codes": [IDENTITY], "inputs": [[1]], "entry": "not valid"}, ValueError, "entry"),
        ({"codes": [IDENTITY], "inputs": [[1]], "entry": ["f", "g"]}, ValueError, "entry"),
        ({"codes": [IDENTITY], "inputs": [[1]], "limits": {"timeout": 0}}, ValueError, "timeout"),
        ({"codes": [IDENTITY], "inputs": [[1]], "limits": {"memory_mb": "big"}}, TypeError, "memory_mb"),
        ({"codes": [IDENTITY], "inputs": [[1]], "limits": {"workers": 1.5}}, TypeError, "workers"),
        ({"codes": [IDENTITY], "inputs": [[1]], "timeout": 5}, TypeError, "timeout"),  # limits go in SandboxLimits
    ],
)
def test_bad_arguments_name_the_field(kwargs, exc, field):
    with pytest.raises(exc, match=field):
        run_functions(**{k: SandboxLimits(**v) if k == "limits" else v for k, v in kwargs.items()})


def test_result_size_cap_and_main_guard():
    with Sandbox(SandboxLimits(workers=1, max_result_bytes=10_000, timeout=10)) as small:
        big = "def f(n):\n    return 'x' * n\n"
        guarded = "def f(x):\n    return x\nif __name__ == '__main__':\n    raise SystemExit('demo ran')\n"
        res = small.run([big, guarded, IDENTITY], [[10, 1_000_000, 20], [5], [7]])
    assert res[0].status == "ok" and res[0].values == ["x" * 10, None, "x" * 20]
    assert "larger than 10000 bytes" in res[0].errors[1]
    assert res[1].status == "ok" and res[1].values == [5]
    assert res[2].values == [7]


def test_an_oversized_request_fails_only_its_own_program(box):
    from findbench.sandbox import MAX_REQUEST_BYTES

    huge = "_T = " + repr("x" * MAX_REQUEST_BYTES) + "\n" + IDENTITY
    res = box.run([IDENTITY, huge, IDENTITY], [[1], [2], [3]])
    assert [r.status for r in res] == ["ok", "error", "ok"] and res[2].values == [3]
    assert "request cap" in res[1].message and res[1].errors == [res[1].message]
    assert box.run([huge], [[1]])[0].status == "error"  # alone too: no request is sent


def test_short_reason_is_one_line_without_host_paths(tmp_path, monkeypatch):
    import findbench

    monkeypatch.setenv("FINDBENCH_CACHE", str(tmp_path / "cache"))
    package = os.path.dirname(os.path.abspath(findbench.__file__))
    assert short_reason("SyntaxError: invalid syntax (<program>, line 3)") == "SyntaxError: invalid syntax (line 3)"
    assert short_reason(f"PermissionError: [Errno 13] Permission denied: '{package}/find/numeric.py'") == (
        "PermissionError: [Errno 13] Permission denied: '<findbench>/find/numeric.py'"
    )
    assert (
        short_reason(f"FileNotFoundError: '{tmp_path}/cache/rows/x.json'")
        == "FileNotFoundError: '<findbench cache>/rows/x.json'"
    )
    assert short_reason("OSError: '/tmp/findbench-sandbox-123-ab_c9/p8812/out.txt' and /tmp/findbench-sandbox-9-x") == (
        "OSError: '<program dir>/out.txt' and <program dir>"
    )
    assert short_reason("ValueError: a\n  b\r\x1b[31mc\x00") == "ValueError: a b [31mc"
    assert short_reason("MemoryError") == "MemoryError: the sandbox's memory limit was reached"
    long = short_reason("E: " + "x" * 5000)
    assert len(long) == REASON_CHARS and long.endswith("...")


def test_limits_are_one_frozen_checked_value():
    import dataclasses

    from findbench.sandbox import DEFAULT_CPU_SECONDS, DEFAULT_MEMORY_MB, DEFAULT_TIMEOUT, SandboxLimits

    limits = SandboxLimits()
    assert (limits.timeout, limits.cpu_seconds, limits.memory_mb, limits.workers) == (
        DEFAULT_TIMEOUT, DEFAULT_CPU_SECONDS, DEFAULT_MEMORY_MB, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        limits.timeout = 1.0
    for bad, exc in (({"cpu_seconds": 0}, ValueError), ({"max_output_bytes": 0}, ValueError),
                     ({"max_files": "many"}, TypeError), ({"timeout": float("inf")}, ValueError)):
        with pytest.raises(exc, match=next(iter(bad))):
            SandboxLimits(**bad)
    loop = "def f(x):\n    while True:\n        pass\n"
    with Sandbox(SandboxLimits(workers=1, timeout=1.0, cpu_seconds=30, max_output_bytes=10)) as box:
        assert box.limits.workers == 1 and box.limits.max_output_bytes == 10 and box.limits.timeout == 1.0
        [looped, printed] = box.run([loop, "print('x' * 50)\n" + IDENTITY], [[0], [0]])
    assert looped.status == "timeout" and "wall-clock limit of 1 s" in looped.message
    assert printed.ok and printed.stdout.startswith("x" * 10 + "\n[... ")
    [res] = run_functions([loop], [[0]], limits=SandboxLimits(timeout=1.0, cpu_seconds=30))
    assert res.status == "timeout" and "of 1 s" in res.message
