"""Sandbox services: a running program calls host functions through the fork server (issue 43's
code tool); every call is answered or refused, and a program that abuses the channel is killed."""

from __future__ import annotations

import time

import pytest

from findbench.sandbox import Sandbox, SandboxLimits

# the program's end of the call pipe, found through a service's closure (what a hostile program can do)
CALLS_FD = ("import os\nfv = dict(zip(double.__code__.co_freevars, (c.cell_contents for c in double.__closure__)))\n"
            "fd = fv['calls_w']\n")


@pytest.fixture(scope="module")
def box():
    with Sandbox(SandboxLimits(workers=2, timeout=3.0, cpu_seconds=2, memory_mb=768)) as sandbox:
        yield sandbox


def test_a_script_calls_services_positionally_or_by_name_and_gets_data_back(box):
    seen = []

    def double(xs, scale=2):
        seen.append(xs)
        return [scale * x for x in xs]

    def refuse(x):
        raise ValueError(f"x: {x} is not allowed")

    code = ("import numpy as np\nprint(double([1, 2]), double(xs=np.arange(3), scale=3))\n"
            "try:\n    refuse(7)\nexcept ToolError as e:\n    print('refused:', e)\n"
            "try:\n    double(1, 2, 3)\nexcept ToolError as e:\n    print('arity:', e)\nprint(type(double).__name__)")
    [res] = box.run([code], [[]], entry=None, services={"double": double, "refuse": refuse})
    assert res.status == "ok" and res.values == [] and res.errors == []
    lines = res.stdout.splitlines()
    assert lines[0] == "[2, 4] [0, 3, 6]" and lines[1] == "refused: x: 7 is not allowed"
    assert lines[2].startswith("arity: ") and "but 3 were given" in lines[2] and lines[3] == "function"
    assert seen == [[1, 2], [0, 1, 2]]


def test_a_script_without_services_has_no_channel_and_its_errors_say_the_line(box):
    [plain] = box.run(["print(sorted(k for k in dir() if not k.startswith('__')))"], [[]], entry=None)
    assert plain.stdout.strip() == "[]"
    [bad] = box.run(["x = 1\n\ny = undefined_name\n"], [[]], entry=None)
    assert bad.status == "error" and bad.message == "line 3: NameError: name 'undefined_name' is not defined"
    with pytest.raises(ValueError, match=r"inputs\[0\] must be empty"):
        box.run(["print(1)"], [[1]], entry=None)
    for bad in ({"__builtins__": print}, {"ok": 5}, {"not a name": print}):
        with pytest.raises(TypeError, match="services must map public Python names to functions"):
            box.run(["print(1)"], [[]], entry=None, services=bad)


def test_time_spent_answering_does_not_count_against_the_program(box):
    def slow(x):
        time.sleep(1.2)
        return x

    [res] = box.run(["for i in range(3):\n    print(slow(i))"], [[]], entry=None, services={"slow": slow})
    assert res.status == "ok" and res.stdout.split() == ["0", "1", "2"]  # 3.6 s of answers, 3 s limit


def test_every_program_of_a_batch_gets_its_own_answers(box):
    codes = [f"print(double([{k}]))" for k in range(6)]
    results = box.run(codes, [[]] * 6, entry=None, services={"double": lambda xs: [2 * x for x in xs]})
    assert [r.stdout.strip() for r in results] == [f"[{2 * k}]" for k in range(6)]


@pytest.mark.parametrize("hostile, status, message", [
    ("os.write(fd, b'x' * 100_000)\nimport time\ntime.sleep(2)", "killed", "a call longer than 65536 bytes"),
    ("for _ in range(20_000):\n    os.write(fd, b'{\"tool\": \"double\", \"args\": [[1]], \"kwargs\": {}}\\n')\n"
     "import time\ntime.sleep(2)", "killed", "left its answers unread"),
])
def test_a_program_that_abuses_the_channel_is_killed_and_the_next_runs(box, hostile, status, message):
    services = {"double": lambda xs: [2 * x for x in xs]}
    res, after = box.run([CALLS_FD + hostile, "print(double([4]))"], [[], []], entry=None, services=services)
    assert res.status == status and message in res.message
    assert after.status == "ok" and after.stdout.strip() == "[8]"


def test_malformed_calls_are_answered_with_an_error_never_run(box):
    ran = []
    code = CALLS_FD + (
        "for line in [b'not json\\n', b'[1]\\n', b'{\"tool\": \"secret\", \"args\": [], \"kwargs\": {}}\\n',\n"
        "             b'{\"tool\": \"double\", \"args\": 5, \"kwargs\": {}}\\n', b'[' * 5000 + b']' * 5000 + b'\\n']:\n"
        "    os.write(fd, line)\n    print(fv['answers'].readline().decode().strip())\nprint(double([1]))")
    [res] = box.run([code], [[]], entry=None, services={"double": lambda xs: ran.append(xs) or xs})
    lines = res.stdout.splitlines()
    assert res.status == "ok" and len(lines) == 6 and all('"error"' in line for line in lines[:5])
    assert "secret" in lines[2] and lines[5] == "[1]" and ran == [[1]]


def test_a_result_that_is_not_json_data_or_too_large_is_refused(box):
    services = {"obj": lambda: object(), "big": lambda: "x" * 70_000}
    [res] = box.run(["for f in (obj, big):\n    try:\n        f()\n    except ToolError as e:\n        print(e)"], [[]],
                    entry=None, services=services)
    assert res.status == "ok" and "not JSON serializable" in res.stdout and "reply larger than" in res.stdout
