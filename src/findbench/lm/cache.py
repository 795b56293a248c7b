"""A persistent request cache around any LM, so an interrupted long run resumes.

Each result is stored in sqlite under a hash of the backend's name, the call kind and the
request; misses run through the wrapped LM in chunks, each committed when done. Safe to share
between threads and processes (WAL). A file that is not a cache is set aside as
``<name>.corrupt-<timestamp>`` with a warning and a fresh cache starts; one that cannot be
opened raises one line naming it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from findbench._checks import instance, positive_int
from findbench.lm.base import LM, Constraint, Conversation, check_candidates, check_continuations, check_generate

log = logging.getLogger(__name__)

#: Seconds a connection waits for another process's lock on the cache.
_BUSY_TIMEOUT_S = 60.0


class _NotACache(Exception):
    """The file opens as sqlite but is not a cache (wrong tables or columns, failed check)."""


def _connect(path: Path) -> sqlite3.Connection:
    """A checked connection to the cache at ``path`` (created if absent)."""
    db = sqlite3.connect(str(path), timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
    try:  # read-only checks first: a file that is not a cache is set aside unchanged
        tables = sorted(name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
        columns = [row[1] for row in db.execute("PRAGMA table_info(cache)")]
        if tables not in ([], ["cache"]) or columns not in ([], ["key", "value"]):
            raise _NotACache(f"tables {tables}, cache columns {columns}; a cache holds one table 'cache' (key, value)")
        check = db.execute("PRAGMA quick_check").fetchone()[0]
        if check != "ok":
            raise _NotACache(f"quick_check: {check}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE IF NOT EXISTS cache (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        db.commit()
    except BaseException:
        db.close()
        raise
    return db


def _set_aside(path: Path) -> Path:
    """Rename ``path`` (and its WAL files) to ``<name>.corrupt-<timestamp>``; return the new path."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    os.replace(path, aside)
    for suffix in ("-wal", "-shm"):  # a stale WAL must not be replayed into the fresh cache
        extra = path.with_name(path.name + suffix)
        if extra.exists():
            os.replace(extra, aside.with_name(aside.name + suffix))
    return aside


def _open_cache(path: Path) -> sqlite3.Connection:
    """:func:`_connect`, setting a corrupt file aside once; one-line errors naming ``path``."""
    try:
        return _connect(path)
    except (_NotACache, sqlite3.DatabaseError) as exc:
        if isinstance(exc, sqlite3.OperationalError):  # could not open or lock: nothing wrong with the content
            if path.exists() and not os.access(path, os.R_OK | os.W_OK):
                raise PermissionError(
                    f"lm cache {path} is not readable and writable by this user; fix its permissions "
                    "or give another cache path"
                ) from None
            raise sqlite3.OperationalError(
                f"lm cache {path} cannot be opened ({exc}); check that no other process holds "
                "it and that it and its folder are writable, or give another cache path"
            ) from None
        aside = _set_aside(path)
        log.warning(
            "lm cache %s is not a readable cache (%s); set aside as %s, starting a fresh cache", path, exc, aside
        )
    return _connect(path)


class CachedLM:
    """Wrap ``lm`` with a sqlite cache at ``path`` (created with its folder); ``chunk_size`` misses
    are sent to ``lm`` per call. Backend options that do not change results (``shared_prefix``)
    are not part of the key; sampled generations are cached too."""

    def __init__(self, lm: LM, path: str | os.PathLike, *, chunk_size: int = 32) -> None:
        self.inner = instance("lm", lm, LM, "an LM (the findbench LM protocol)")
        self.name = lm.name
        self.path = Path(path)
        self.chunk_size = positive_int("chunk_size", chunk_size)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = _open_cache(self.path)
        #: Items answered from the cache / sent to the wrapped LM since creation.
        self.hits = self.misses = 0
        #: Whether the wrapped LM takes ``generate(..., constraint=...)`` / runs its model in this process.
        self.supports_constraints = bool(getattr(lm, "supports_constraints", False))
        self.in_process = bool(getattr(lm, "in_process", False))

    def __repr__(self) -> str:
        return f"CachedLM({self.inner!r}, path={str(self.path)!r})"

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM cache").fetchone()[0])

    def _key(self, kind: str, conv: Conversation, options: dict) -> str:
        text = json.dumps({"backend": self.name, "kind": kind, "conversation": list(conv), "options": options},
                          sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def _run(
        self, kind: str, conversations: Sequence[Conversation], options: dict, compute: Callable[[list], list]
    ) -> list:
        keys = [self._key(kind, c, options) for c in conversations]
        found: dict[str, Any] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = list(set(keys[start : start + 500]))
                rows = self._db.execute(
                    f"SELECT key, value FROM cache WHERE key IN ({','.join('?' * len(part))})", part
                )
                found.update({k: json.loads(v) for k, v in rows})
        # the first index of each key not found, in order (a key repeated in one call is computed once)
        todo = sorted({k: i for i, k in reversed(list(enumerate(keys))) if k not in found}.values())
        self.hits += len(keys) - len(todo)
        if todo:
            log.info("%s cache: %d of %d %s items to compute", self.name, len(todo), len(keys), kind)
        for start in range(0, len(todo), self.chunk_size):
            idx = todo[start : start + self.chunk_size]
            results = compute([conversations[i] for i in idx])
            if len(results) != len(idx):
                raise RuntimeError(f"{self.name} returned {len(results)} results for {len(idx)} conversations")
            with self._lock, self._db:  # one transaction, committed on leaving
                self._db.executemany(
                    "INSERT OR REPLACE INTO cache (key, value) VALUES (?, ?)",
                    [(keys[i], json.dumps(r)) for i, r in zip(idx, results)],
                )
            self.misses += len(idx)
            found.update({keys[i]: r for i, r in zip(idx, results)})
        return [found[k] for k in keys]

    def generate(
        self,
        conversations: Sequence[Conversation],
        *,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        progress: bool = False,
        constraint: Constraint | Sequence[Constraint | None] | None = None,
    ) -> list[str]:
        """As the wrapped LM's ``generate``, answering repeated requests from the cache (the key holds the grammar)."""
        constraints = check_generate(conversations, max_new_tokens, temperature, constraint)
        if any(c is not None for c in constraints) and not self.supports_constraints:
            raise TypeError(f"{self.name} cannot constrain generation (constraint= given)")
        options = {"max_new_tokens": max_new_tokens, "temperature": float(temperature)}
        out: dict[int, str] = {}
        for c in dict.fromkeys(constraints):  # one cache pass per distinct constraint, in order
            idx = [i for i, ci in enumerate(constraints) if ci == c]
            texts = self._run(
                "generate",
                [conversations[i] for i in idx],
                options | ({} if c is None else {"constraint": c.to_dict()}),
                lambda convs, c=c: self.inner.generate(
                    convs, max_new_tokens=max_new_tokens, temperature=temperature, progress=progress,
                    **({} if c is None else {"constraint": c}),
                ),
            )
            out.update(zip(idx, texts))
        return [out[i] for i in range(len(conversations))]

    def candidate_logprobs(
        self,
        conversations: Sequence[Conversation],
        candidates: Sequence[str],
        *,
        assistant_prefix: str = "",
        progress: bool = False,
        **backend_options: Any,
    ) -> list[list[float]]:
        """As the wrapped LM's ``candidate_logprobs``, answering repeated requests from the cache."""
        options = {
            "candidates": check_candidates(conversations, candidates, assistant_prefix),
            "assistant_prefix": assistant_prefix,
        }
        return self._run(
            "candidate_logprobs",
            conversations,
            options,
            lambda convs: self.inner.candidate_logprobs(
                convs, candidates, assistant_prefix=assistant_prefix, progress=progress, **backend_options
            ),
        )

    def continuation_logprobs(
        self, conversations: Sequence[Conversation], continuations: Sequence[str], *, progress: bool = False
    ) -> list[float]:
        """As the wrapped LM's ``continuation_logprobs``, answering repeated requests from the cache
        (the continuation is keyed as a final assistant message)."""
        continuations = check_continuations(conversations, continuations)
        if not callable(getattr(self.inner, "continuation_logprobs", None)):
            raise TypeError(f"{self.inner.name} cannot score continuations (no continuation_logprobs)")
        keyed = [list(c) + [{"role": "assistant", "content": t}] for c, t in zip(conversations, continuations)]
        return self._run(
            "continuation_logprobs",
            keyed,
            {},
            lambda convs: self.inner.continuation_logprobs(
                [c[:-1] for c in convs], [c[-1]["content"] for c in convs], progress=progress
            ),
        )
