"""Small I/O helpers shared by every writer: nothing half-written on disk after a crash, and
files others can read (``tempfile`` makes 0600 files and 0700 folders; what findbench writes
is meant to be shared, so the final modes follow the umask like any ``open()``)."""

from __future__ import annotations

import contextlib
import csv
import errno
import hashlib
import io
import json
import logging
import os
import shutil
import socket
import stat
import tempfile
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; on success it replaces ``path`` at once, on an
    exception it is removed and ``path`` is left as it was. What the caller wrote inside gets the
    umask's modes (libraries that write through their own temporary files, like safetensors, leave 0600)."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        _share(tmp)  # the folder too: 0700 from mkdtemp
        old = path.with_name(f".{path.name}.old-{os.getpid()}")
        if path.exists():
            os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _share(root: Path) -> None:
    """Give ``root`` and everything under it the modes a plain ``open()`` / ``mkdir()`` would: 0666 (0777
    for folders and executables) less the umask. Links are left alone (never followed)."""
    mask = umask()
    os.chmod(root, 0o777 & ~mask)
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            st = os.lstat(entry := os.path.join(folder, name))
            if stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):  # folders and executables: 0777 less the mask
                os.chmod(entry, (0o777 if stat.S_ISDIR(st.st_mode) or st.st_mode & 0o100 else 0o666) & ~mask)


def umask() -> int:
    """The process's umask: from ``/proc/self/status`` where Linux shows it (reading it with
    ``os.umask`` changes it for a moment, for every thread)."""
    with contextlib.suppress(OSError, ValueError, StopIteration), open("/proc/self/status") as fh:
        return int(next(line for line in fh if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and a rename."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), 0o666 & ~umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return path


def read_json_object(path: str | os.PathLike, what: str) -> dict:
    """The JSON object in ``path``; ValueError, one line naming ``what`` and the file, when it
    cannot be read (missing, truncated, not UTF-8, not JSON, nested too deeply) or holds something else."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"{what} {path} is unreadable ({type(exc).__name__}: {exc})") from None
    return parse_json_object(data, path, what)


def parse_json_object(data: bytes, path: str | os.PathLike, what: str) -> dict:
    """The JSON object ``data`` (the bytes of ``path``) holds; the errors of :func:`read_json_object`.
    A RecursionError of the parser (thousands of nested brackets) is one of them."""
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise ValueError(f"{what} {path} is unreadable ({type(exc).__name__}: {reason})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{what} {path} must hold a JSON object, got {type(obj).__name__}")
    return obj


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def fingerprint(obj: Any) -> str:
    """A short content hash of JSON-able data: the key of findbench's resumable stages."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8")).hexdigest()[
        :16
    ]


def files_digest(paths: Iterable[Path], root: Path) -> str:
    """sha256 over the names (relative to ``root``, sorted) and bytes of ``paths``: what a
    cache keyed by files' contents depends on."""
    digest = hashlib.sha256()
    for path in sorted(Path(p) for p in paths):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def cache_dir(*parts: str) -> Path:
    """findbench's cache folder (``$FINDBENCH_CACHE`` or ``~/.cache/findbench``), created on demand."""
    path = Path(os.environ.get("FINDBENCH_CACHE", Path.home() / ".cache" / "findbench")).joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


#: Seconds between the lines of a process waiting on another's :func:`cache_lock`.
LOCK_REPORT_S = 30.0


def _holder(owner: Path) -> str:
    """Who holds a :func:`cache_lock` and since when, from its ``.owner`` file."""
    try:
        info = json.loads(owner.read_text(encoding="utf-8"))
        since = time.strftime("%H:%M:%S", time.localtime(float(info["since"])))
        return f"held by pid {int(info['pid'])} on {info['host']} since {since}, {info['doing']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "holder unknown"


@contextlib.contextmanager
def cache_lock(path: str | os.PathLike, doing: str) -> Iterator[None]:
    """Hold the cross-process lock ``<path>.lock`` while making the cache entry ``path``; the holder
    is written beside it (``<path>.lock.owner``: pid, host, since when, doing what). When another
    process holds it, a warning says so ("waiting for another process <doing> (lock <file>, held by
    pid N on <host> since HH:MM:SS, ...)") and a line every :data:`LOCK_REPORT_S` seconds says how
    long this one has waited; the caller then looks for the finished entry before making it."""
    from filelock import FileLock, Timeout

    lock, log = FileLock(f"{os.fspath(path)}.lock"), logging.getLogger(__name__)
    owner = Path(f"{lock.lock_file}.owner")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        log.warning("waiting for another process %s (lock %s, %s)", doing, lock.lock_file, _holder(owner))
        start = time.monotonic()
        while True:
            try:
                lock.acquire(timeout=LOCK_REPORT_S)
                break
            except Timeout:
                waited = int(time.monotonic() - start)
                log.warning("still waiting for lock %s (%s): %d min %02d s so far", lock.lock_file, _holder(owner),
                            waited // 60, waited % 60)
    try:
        with contextlib.suppress(OSError):
            atomic_write_json(owner, {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
                                      "doing": doing})
        yield
    finally:
        with contextlib.suppress(OSError):
            owner.unlink()
        lock.release()


def read_untrusted_bytes(path: str | os.PathLike, max_bytes: int, what: str) -> bytes:
    """The bytes of ``path`` read as a file someone else may have planted: a regular file only
    (a symlink, device, FIFO or socket is refused without being followed or opened for reading
    its target: ``O_NOFOLLOW | O_NONBLOCK``, then ``fstat``), at most ``max_bytes`` long.
    ValueError, one line naming ``what`` and the file, otherwise."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        reason = (
            "is a symbolic link (refused)"
            if exc.errno in (errno.ELOOP, errno.EMLINK)
            else f"cannot be opened ({exc.strerror})"
        )
        raise ValueError(f"{what} {path} {reason}") from None
    try:
        with os.fdopen(fd, "rb") as fh:  # closes fd, whatever happens
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise ValueError(f"{what} {path} is not a regular file (refused)")
            if info.st_size > max_bytes:
                raise ValueError(f"{what} {path} is {info.st_size:,} bytes, over the {max_bytes:,}-byte cap")
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise ValueError(f"{what} {path} cannot be read ({exc.strerror})") from None
    if len(data) > max_bytes:  # grew after fstat
        raise ValueError(f"{what} {path} is over the {max_bytes:,}-byte cap")
    return data


def read_untrusted_text(path: str | os.PathLike, max_bytes: int, what: str) -> str:
    """:func:`read_untrusted_bytes` decoded as UTF-8 (undecodable bytes replaced)."""
    return read_untrusted_bytes(path, max_bytes, what).decode("utf-8", errors="replace")


def read_untrusted_json(path: str | os.PathLike, max_bytes: int, what: str) -> dict:
    """The JSON object of an untrusted file (:func:`read_untrusted_bytes`, :func:`parse_json_object`)."""
    return parse_json_object(read_untrusted_bytes(path, max_bytes, what), path, what)


#: First characters that make a spreadsheet read a cell as a formula (OWASP's CSV injection list).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell that no spreadsheet runs: text starting with a formula character (``=``, ``+``,
    ``-``, ``@``, tab, carriage return) or with ``'`` gets a leading ``'``; numbers, and text that
    is a plain number (``-6.25``), stay as they are. :func:`csv_uncell` undoes it."""
    if isinstance(value, str) and value.startswith((*_FORMULA_START, "'")) and not _is_number(value):
        return "'" + value
    return value


def _is_number(text: str) -> bool:
    """Whether ``text`` is a plain number (``-6.25``, ``-inf``): written as it is, a spreadsheet reads a number."""
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() == text


def csv_uncell(text: str) -> str:
    """The text a cell of :func:`csv_cell` held."""
    return text[1:] if text.startswith("'") else text


def csv_text(columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> str:
    """A CSV document (header, then rows; ``\\n`` line ends) with every cell through :func:`csv_cell`:
    the one CSV writer of findbench."""
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([[csv_cell(c) for c in columns],
                                                    *([csv_cell(v) for v in row] for row in rows)])
    return buf.getvalue()


def read_csv_rows(path: str | os.PathLike) -> list[dict[str, str]]:
    """The rows of a CSV file findbench wrote (:func:`csv_text`) as dicts, cells decoded with :func:`csv_uncell`."""
    with open(path, newline="", encoding="utf-8") as fh:
        return [{csv_uncell(k): csv_uncell(v or "") for k, v in row.items()} for row in csv.DictReader(fh)]
