"""Small I/O helpers shared by every writer: nothing half-written on disk after a crash, and
files others can read (``tempfile`` makes 0600 files and 0700 folders; what findbench writes
is meant to be shared, so the final modes follow the umask like any ``open()``)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary directory beside ``path``; on success it replaces ``path`` at once, on an
    exception it is removed and ``path`` is left as it was."""
    path = Path(path).resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~umask())
        yield tmp
        if path.exists():
            old = path.with_name(f".{path.name}.old-{os.getpid()}")
            os.replace(path, old)
            os.replace(tmp, path)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def umask() -> int:
    """The process's umask: from ``/proc/self/status`` where Linux shows it (reading it with
    ``os.umask`` changes it for a moment, for every thread)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status") as fh:
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
    cannot be read (missing, truncated, not UTF-8, not JSON) or holds something else."""
    try:
        obj = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{what} {path} is unreadable ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{what} {path} must hold a JSON object, got {type(obj).__name__}")
    return obj


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def fingerprint(obj: Any) -> str:
    """A short content hash of JSON-able data: the key of findbench's resumable stages."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]


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
    root = Path(os.environ.get("FINDBENCH_CACHE", Path.home() / ".cache" / "findbench"))
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def cache_lock(path: str | os.PathLike, doing: str) -> Iterator[None]:
    """Hold the cross-process lock ``<path>.lock`` while making the cache entry ``path``. When
    another process holds it, a warning says so ("waiting for another process <doing> (lock
    <file>)") and this one waits; the caller then looks for the finished entry before making it."""
    from filelock import FileLock, Timeout

    lock = FileLock(f"{os.fspath(path)}.lock")
    try:
        lock.acquire(timeout=0)
    except Timeout:
        logging.getLogger(__name__).warning("waiting for another process %s (lock %s)", doing, lock.lock_file)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
