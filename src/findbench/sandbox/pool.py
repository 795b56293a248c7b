"""The pool: fork servers (``_worker.py``) started, fed and replaced, and the one framed, bounded,
checked reply the caller accepts per program.

Each slot's thread sends a batch of requests (each a 4-byte length and the program's JSON; no more
than the request pipe holds at once), then reads, per program, the server's header line and the
bytes the program wrote; anything else than exactly one well-formed reply line of the expected
shape fails that program only. A server that dies, hangs past a program's wall-clock limit (plus
a slack) or breaks the protocol is killed and replaced, and the rest of its batch goes to the next.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import fcntl
import glob
import itertools
import json
import logging
import math
import os
import select
import shutil
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from findbench._checks import instance, integer
from findbench.sandbox import _worker, policy
from findbench.sandbox.policy import MAX_REQUEST_BYTES, SandboxLimits, SandboxUnavailableError

logger = logging.getLogger(__name__)

STATUSES = ("ok", "error", "timeout", "killed")
# Deepest nesting of a value a reply may carry (the program side refuses deeper results).
_MAX_DEPTH = 64
_STARTUP_TIMEOUT = 120.0  # seconds for a worker to import numpy and report ready (shared CPUs)
# The fork server enforces each program's wall-clock limit itself; the parent only steps in
# (killing the whole server) when a reply is this much later than that.
_PARENT_SLACK = 30.0
_MESSAGE_LIMIT = 64 * 1024
_MAX_ITEMS_PER_MESSAGE = 32


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


def _failed(n_inputs: int, status: str, message: str, isolation: str) -> SandboxResult:
    return SandboxResult(status, [None] * n_inputs, [message] * n_inputs, "", message, isolation)


def _sequence(name: str, value: Any, what: str) -> list:
    """``value`` as a list when it is a sequence (not a string); else a ``TypeError`` naming ``name``."""
    return list(instance(name, value, Sequence, what, exclude=(str, bytes)))


def _check_entry(entry: Any, n: int) -> list[str | None]:
    """One validated entry per program (``entry`` is one string, ``None`` or one of those per program)."""
    entries = [entry] * n if entry is None or isinstance(entry, str) else _sequence(
        "entry", entry, "'last_def', a function name or one of those per program")
    if len(entries) != n:
        raise ValueError(f"entry must have one element per program ({len(entries)} != {n})")
    for k, e in enumerate(entries):
        where = "entry" if isinstance(entry, str) else f"entry[{k}]"
        instance(where, e, (str, type(None)), "'last_def', a function name or None")
        if e not in ("last_def", None) and not e.isidentifier():
            raise ValueError(f"{where} must be 'last_def' or a Python identifier, got {e!r}")
    return entries


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


def _answer(services: Mapping[str, Callable[..., Any]], line: bytes) -> bytes:
    """The answer line to a program's call line (hostile): ``{"reply": result}``, or ``{"error": why}``
    when the call is malformed, names no service, the service refuses it (``ValueError``,
    ``TypeError``) or its result is not JSON data of at most :data:`~._worker.MAX_CALL_BYTES`."""
    try:
        call = json.loads(line)
        if not isinstance(call, dict) or not _shallow(call):
            raise ValueError("a call is one JSON object")
        name, args, kwargs = call.get("tool"), call.get("args"), call.get("kwargs")
        if not isinstance(name, str) or name not in services:
            raise ValueError(f"no service {name!r}; the services are {sorted(services)}")
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise ValueError("a call's args is a list and its kwargs an object")
        data = json.dumps({"reply": services[name](*args, **kwargs)}, separators=(",", ":")).encode()
        if len(data) >= _worker.MAX_CALL_BYTES:
            raise ValueError(f"{name}: reply larger than {_worker.MAX_CALL_BYTES} bytes")
    except (ValueError, TypeError, RecursionError) as exc:
        data = json.dumps({"error": str(exc)[:_MESSAGE_LIMIT // 16] or type(exc).__name__}).encode()
    return data + b"\n"


def _clean_stale_dirs() -> None:
    """Delete the folders of fork servers whose caller is gone (``kill -9`` leaves them);
    folder names carry the caller's pid: ``findbench-sandbox-<pid>-*``."""
    for path in glob.glob(os.path.join(glob.escape(tempfile.gettempdir()), policy.DIR_PREFIX + "*-*")):
        pid = os.path.basename(path).split("-")[2]
        if pid.isdigit() and int(pid) != os.getpid() and not os.path.exists(f"/proc/{pid}"):
            _worker.rmtree(path)


class _Worker:
    """One fork server and the parent's end of its pipes (protocol: see ``_worker.py``)."""

    def __init__(self, proc: subprocess.Popen, tmpdir: str, line_limit: int):
        self.proc, self.tmpdir, self.line_limit = proc, tmpdir, line_limit
        self.buf = bytearray()
        self.fd = proc.stdout.fileno()
        self.poller = select.poll()
        self.poller.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        with contextlib.suppress(OSError):  # a request pipe that holds a whole batch (Linux allows anyone 1 MiB)
            fcntl.fcntl(proc.stdin.fileno(), fcntl.F_SETPIPE_SZ, 1 << 20)
        self.pipe_bytes = fcntl.fcntl(proc.stdin.fileno(), fcntl.F_GETPIPE_SZ)

    def _more(self, deadline: float) -> bool:
        """Add what the server wrote to ``buf`` (waiting until ``deadline``, else ``TimeoutError``); False on EOF."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        if self.poller.poll(max(1, math.ceil(remaining * 1000))):
            chunk = os.read(self.fd, 1 << 20)
            self.buf += chunk
            return bool(chunk)
        return True

    def read_line(self, deadline: float) -> bytes | None:
        """Next reply line; ``None`` on EOF; raises ``TimeoutError`` / ``OverflowError``."""
        while (nl := self.buf.find(b"\n")) < 0:
            if len(self.buf) > self.line_limit:
                raise OverflowError(f"worker reply longer than {self.line_limit} bytes")
            if not self._more(deadline):
                return None
        line = bytes(self.buf[:nl])
        del self.buf[: nl + 1]
        return line

    def read_frame(self, deadline: float) -> tuple[Any, bytes, bool] | None:
        """The fork server's next ``(outcome, reply bytes, whether it is a program's call)``; ``None`` on EOF; raises
        ``TimeoutError`` / ``OverflowError`` (``ValueError`` for a header it did not write)."""
        line = self.read_line(deadline)
        if line is None:
            return None
        header = json.loads(line)
        size = header["size"]
        if not isinstance(size, int) or not 0 <= size <= self.line_limit:
            raise OverflowError(f"worker reply of {size!r} bytes")
        while len(self.buf) < size:
            if not self._more(deadline):
                return None
        body = bytes(self.buf[:size])
        del self.buf[:size]
        return header.get("outcome"), body, header.get("call") is True

    def send(self, requests: bytes) -> None:
        self.proc.stdin.write(requests)
        self.proc.stdin.flush()

    def kill(self) -> int | None:
        self.proc.kill()  # nothing once the process was reaped
        with contextlib.suppress(subprocess.TimeoutExpired):  # an unkillable process: returncode None
            self.proc.wait(timeout=30)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        _worker.rmtree(self.tmpdir)
        return self.proc.returncode

    def close(self) -> None:
        """Ask the worker to exit (EOF on its request pipe), then make sure it did."""
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=2)
        self.kill()


class Sandbox(contextlib.AbstractContextManager):
    """A pool of reusable sandboxed fork servers (use as a context manager: ``with`` gives the pool).

    Args:
        limits: what each program gets (:class:`SandboxLimits`, e.g. ``SandboxLimits(workers=2, timeout=5)``).
        seed: ``random`` and ``numpy.random`` are seeded with it in every program.
        isolate_network: a fresh network namespace for the fork servers.
        drop_privileges: when root, run programs as uid/gid 65534 (``nobody``).
        landlock: confine each program with Landlock where the kernel offers it.
        bwrap: run the fork servers in bubblewrap: ``None`` when installed, ``True`` required.
        allow_unconfined: run where a boundary is missing (no Landlock and no bwrap, or no seccomp
            and no bwrap); default ``$FINDBENCH_ALLOW_UNCONFINED``.
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        seed: int = 0,
        isolate_network: bool = True,
        drop_privileges: bool = True,
        landlock: bool = True,
        bwrap: bool | None = None,
        allow_unconfined: bool | None = None,
    ):
        limits = limits or SandboxLimits()
        self.limits = dataclasses.replace(limits, workers=limits.workers or max(1, min(4, os.cpu_count() or 1)))
        integer("seed", seed, 0)
        for name, value in (("landlock", landlock), ("isolate_network", isolate_network), ("drop_privileges",
                            drop_privileges), ("bwrap", bwrap), ("allow_unconfined", allow_unconfined)):
            optional = name in ("bwrap", "allow_unconfined")
            instance(name, value, (bool, type(None)) if optional else bool, f"a bool{' or None' if optional else ''}")
        self._bwrap = shutil.which("bwrap") if bwrap is not False else None
        if bwrap and self._bwrap is None:
            raise SandboxUnavailableError("bwrap=True but bubblewrap is not installed (apt-get install bubblewrap)")
        env_opt_in = os.environ.get(policy.ALLOW_UNCONFINED_ENV, "").strip().lower() in ("1", "true", "yes", "on")
        self.allow_unconfined = env_opt_in if allow_unconfined is None else allow_unconfined
        #: The fork servers' configuration (``_worker.py``); tests switch ``audit_hook`` off to
        #: show that the kernel layers hold alone.
        self.config = {
            **dataclasses.asdict(self.limits),
            "max_request_bytes": MAX_REQUEST_BYTES,
            "seed": seed,
            "isolate_network": isolate_network,
            "drop_privileges": drop_privileges and os.geteuid() == 0,
            "landlock": landlock,
            "bwrap": bool(self._bwrap),
            "seccomp_bpf": policy.seccomp_program(),
            "packages": list(_worker.PROGRAM_PACKAGES),
            "deny": list(policy.denied_paths()),
            "audit_hook": True,
        }
        self._line_limit = self.limits.max_result_bytes + 8 * self.limits.max_output_bytes + _MESSAGE_LIMIT
        self._workers: list[_Worker | None] = [None] * self.limits.workers
        self._lock = threading.Lock()
        self._run_lock = threading.Lock()
        # Workers die with their parent (PR_SET_PDEATHSIG follows the *thread* that forked
        # them), so every worker is started from this one long-lived thread.
        self._spawner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="findbench-sandbox")
        self._closed = False
        #: What the fork servers applied (filled when the first one starts).
        self.isolation: dict = {}

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        with contextlib.suppress(Exception):
            self.close()

    def close(self) -> None:
        """Stop all workers and remove their temporary directories."""
        if self._closed:
            return
        self._closed = True
        for worker in filter(None, self._workers):
            worker.close()
        self._workers = [None] * len(self._workers)
        self._spawner.shutdown(wait=True)

    @property
    def isolation_level(self) -> str:
        """The layers in force, e.g. ``"landlock+netns+uid"`` (``""`` before the first run)."""
        return policy.isolation_level(self.isolation) if self.isolation else ""

    def _popen(self) -> _Worker:
        _clean_stale_dirs()
        tmpdir = tempfile.mkdtemp(prefix=f"{policy.DIR_PREFIX}{os.getpid()}-")
        proc = subprocess.Popen(
            policy.server_command(dict(self.config, tmpdir=tmpdir), self._bwrap),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=tmpdir,
            env={**policy.SERVER_ENV, "HOME": tmpdir, "TMPDIR": tmpdir},
            start_new_session=True,
        )
        return _Worker(proc, tmpdir, self._line_limit)

    def _start_worker(self) -> _Worker:
        if self._closed:
            raise RuntimeError("the Sandbox is closed")
        worker = self._spawner.submit(self._popen).result()
        line = None
        with contextlib.suppress(TimeoutError, OverflowError):
            line = worker.read_line(time.monotonic() + _STARTUP_TIMEOUT)
        hello = json.loads(line) if line else {}
        if not hello.get("ready"):
            raise RuntimeError(f"sandbox worker failed to start (exit code {worker.kill()}): {hello.get('error', '')}")
        iso = dict(hello.get("isolation", {}))
        refusal = None if self.allow_unconfined else policy.unavailable_message(iso)
        if refusal:
            worker.kill()
            raise SandboxUnavailableError(refusal)
        if not self.isolation:
            self.isolation = iso
            logger.debug("sandbox isolation: %s (%s)", policy.isolation_level(iso), iso)
        return worker

    def run(
        self,
        codes: Sequence[str],
        inputs: Sequence[Sequence[Any]],
        *,
        entry: str | Sequence[str] | None = "last_def",
        progress: bool = False,
        services: Mapping[str, Callable[..., Any]] | None = None,
    ) -> list[SandboxResult]:
        """Run every program ``codes[k]`` on its JSON inputs ``inputs[k]``; one result per program.

        ``entry="last_def"`` calls each program's last top-level ``def`` (FIND's rule); any other
        value names the function (or one entry per program); ``None`` runs the program as a script
        (its inputs empty; ``stdout`` is what it gives). Each input is the single argument,
        passed as data. Programs run as ``__name__ == "__findbench_program__"`` (so ``__main__``
        demo blocks are skipped).

        ``services``: host functions a program may call by name while it runs (with JSON arguments,
        positional or keyword). Each call is answered with the function's JSON result, or raises
        ``ToolError`` in the program with the message of the ``ValueError``/``TypeError`` it raised;
        they run in this process, in the pool's threads, one program at a time per worker.
        """
        codes = _sequence("codes", codes, "a sequence of strings")
        inputs = _sequence("inputs", inputs, "a sequence of input lists")
        if len(codes) != len(inputs):
            raise ValueError(f"codes and inputs must have the same length ({len(codes)} != {len(inputs)})")
        entries = _check_entry(entry, len(codes))
        if services is not None and not all(isinstance(n, str) and n.isidentifier() and not n.startswith("_")
                                            and callable(f) for n, f in dict(services).items()):
            raise TypeError("services must map public Python names to functions")
        results: list[SandboxResult | None] = [None] * len(codes)
        todo: deque[tuple[int, int, bytes]] = deque()
        for k, (code, args) in enumerate(zip(codes, inputs)):
            instance(f"codes[{k}]", code, str, "a string")
            args = _sequence(f"inputs[{k}]", args, "a list of inputs")
            if entries[k] is None and args:
                raise ValueError(f"inputs[{k}] must be empty: entry None runs the program as a script")
            try:
                payload = json.dumps({"k": k, "code": code, "inputs": args, "entry": entries[k],
                                      "services": sorted(services or ())},
                                     separators=(",", ":"), allow_nan=True).encode("utf-8", "surrogatepass")
            except (TypeError, ValueError) as exc:
                raise TypeError(f"inputs[{k}] must be JSON data (numbers, strings, lists, dicts): {exc}") from None
            if len(payload) > MAX_REQUEST_BYTES:  # this program's error, not the batch's
                results[k] = _failed(len(args), "error", f"the program with its inputs is {len(payload):,} bytes as "
                                     f"JSON, over the sandbox's {MAX_REQUEST_BYTES:,}-byte request cap",
                                     self.isolation_level)
            else:
                todo.append((k, len(args), payload))
        if self._closed:
            raise RuntimeError("the Sandbox is closed")
        from tqdm.auto import tqdm  # noqa: PLC0415

        bar = tqdm(total=len(todo), desc="sandbox", unit="program", disable=not progress)
        errors: list[BaseException] = []
        n_threads = min(self.limits.workers, len(todo))
        # a program with services must be alone in the pipe, which then carries its answers
        per_message = 1 if services else max(1, min(_MAX_ITEMS_PER_MESSAGE, len(todo) // (4 * n_threads or 1)))

        def loop(slot: int) -> None:
            try:
                while True:
                    with self._lock:
                        batch = [todo.popleft() for _ in range(min(per_message, len(todo)))]
                    if not batch:
                        return
                    done = self._run_batch(slot, batch, results, services)
                    bar.update(done)
                    with self._lock:
                        todo.extendleft(reversed(batch[done:]))
            except BaseException as exc:  # surfaced in the caller's thread below
                errors.append(exc)

        threads = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(n_threads)]
        with self._run_lock:
            try:
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            finally:
                bar.close()
        if errors:
            raise errors[0]
        return results  # type: ignore[return-value]

    def _run_batch(self, slot: int, batch: list[tuple[int, int, bytes]], results: list,
                   services: Mapping[str, Callable[..., Any]] | None = None) -> int:
        """Send worker ``slot`` (started or replaced as needed) the first programs of ``batch``: as
        many as its request pipe holds at once, at least one (the fork server reads one request at a
        time and writes each reply before the next, so a parent still blocked writing requests would
        never read those replies). Fill their ``results``; return how many finished."""
        worker = self._workers[slot]
        if worker is None or worker.proc.poll() is not None:
            if worker is not None:
                worker.kill()
            worker = self._workers[slot] = self._start_worker()
        sizes = itertools.accumulate(len(payload) + 4 for _, _, payload in batch)
        batch = batch[: max(1, sum(size <= worker.pipe_bytes for size in sizes))]
        flag = _worker.SERVICES_BIT if services else 0
        requests = b"".join((len(payload) | flag).to_bytes(4, "big") + payload for _, _, payload in batch)
        try:
            worker.send(requests)
        except OSError:  # the idle worker died between batches: no program is to blame
            worker.kill()
            worker = self._workers[slot] = self._start_worker()
            worker.send(requests)
        started = time.monotonic()
        for done, (k, n_inputs, _) in enumerate(batch, 1):
            results[k] = self._reply(slot, worker, k, n_inputs, started, services)
            if self._workers[slot] is None:  # killed: the rest of the batch goes to its successor
                return done
            started = time.monotonic()
        return len(batch)

    def _reply(self, slot: int, worker: _Worker, k: int, n_inputs: int, started: float,
               services: Mapping[str, Callable[..., Any]] | None = None) -> SandboxResult:
        """Program ``k``'s result from the fork server's next frame (its calls answered first); a
        server that hangs (past the program's limit and a slack after ``started`` or the last
        answer), dies or breaks the protocol is killed."""
        level, timeout = self.isolation_level, self.limits.timeout
        try:
            while (frame := worker.read_frame(started + timeout + _PARENT_SLACK)) is not None and frame[2]:
                if not services:
                    raise ValueError("a call from a program without services")
                answer = _answer(services, frame[1])
                worker.send(len(answer).to_bytes(4, "big") + answer)
                started = time.monotonic()
        except TimeoutError:
            failure = "timeout", f"wall-clock limit of {timeout:g} s exceeded"
        except (OverflowError, ValueError, KeyError, TypeError, OSError) as exc:
            failure = "killed", f"worker protocol broken: {exc}"
        else:
            if frame is not None:
                outcome, body, _ = frame  # an outcome: the server says why the program gave no reply
                return (_failed(n_inputs, str(outcome[0]), str(outcome[1]), level) if outcome
                        else self._parse_reply(body, k, n_inputs, level))
            rc = worker.kill()  # the fork server itself died: not the program's doing as a rule
            failure = "killed", (f"worker killed by signal {_worker.signal_name(-rc)}" if rc and rc < 0
                                 else f"worker exited unexpectedly (exit code {rc})")
        worker.kill()
        self._workers[slot] = None
        return _failed(n_inputs, *failure, level)

    @staticmethod
    def _parse_reply(body: bytes, k: int, n_inputs: int, level: str) -> SandboxResult:
        """The program's reply if it is exactly one JSON line of the expected shape for this item;
        anything else fails this item only and never raises."""
        try:
            if body.count(b"\n") != 1 or not body.endswith(b"\n"):
                raise ValueError("not exactly one reply line")
            reply = json.loads(body)
            if not isinstance(reply, dict) or not _shallow(reply):
                raise ValueError("not a reply")
            status, values, errors = reply.get("status"), reply.get("values"), reply.get("errors")
            stdout, message = reply.get("stdout", ""), reply.get("message", "")
            if (
                reply.get("k") != k
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
            return _failed(n_inputs, "killed", "the program's process sent a malformed reply", level)
        return SandboxResult(status, values, errors, stdout, message, level)
