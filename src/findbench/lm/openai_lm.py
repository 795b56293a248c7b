"""OpenAI-compatible HTTP backend (vLLM and friends): chat completions with logprobs.

A :class:`~findbench.lm.base.Constraint` goes into vLLM's ``structured_outputs`` field (vLLM >=
0.12); candidate log-probs use ``top_logprobs`` (else ``prompt_logprobs``); continuation log-probs
need vLLM. Requests run in a thread pool, retried with backoff on connection errors, timeouts,
408, 429 and 5xx; a server that is down is a ``ConnectionError`` naming the URL.
"""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from tqdm.auto import tqdm
from urllib3.util import Retry

from findbench._checks import integer, number, positive_int
from findbench.lm.base import (
    Constraint,
    Conversation,
    check_candidates,
    check_continuations,
    check_generate,
    check_interrupt,
    progress_label,
    split_candidates,
)

log = logging.getLogger(__name__)

_RETRY_STATUS = {408, 429, 500, 502, 503, 504}
#: Request fields that continue the conversation's final (assistant) message.
_CONTINUE = {"add_generation_prompt": False, "continue_final_message": True}


def structured_outputs_field(constraint: Constraint) -> dict[str, Any]:
    """vLLM's ``structured_outputs`` request field for ``constraint`` (JSON compact, as in process)."""
    return ({"regex": constraint.regex} if constraint.regex is not None
            else {"json": constraint.schema(), "disable_any_whitespace": True})


class OpenAILM:
    """An :class:`~findbench.lm.base.LM` served over an OpenAI-compatible API.

    Args:
        base_url: e.g. ``"http://127.0.0.1:8000/v1"``.
        model: the served model name (``--served-model-name`` of vLLM).
        api_key: bearer token; default ``$OPENAI_API_KEY`` (vLLM needs none unless started with one).
        max_workers: concurrent requests.
        timeout: seconds per request.
        max_retries: retries per request after the first try.
        backoff: urllib3's ``backoff_factor``: retry ``n >= 2`` waits ``backoff * 2 ** (n - 1)`` s.
        top_logprobs: alternatives asked for per candidate request (at most 20, vLLM's default).
    """

    #: with structured outputs ``auto`` a server model answers freely (``on`` constrains it)
    supports_constraints = True
    in_process = False

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        max_workers: int = 8,
        timeout: float = 120.0,
        max_retries: int = 4,
        backoff: float = 0.5,
        top_logprobs: int = 20,
        name: str | None = None,
    ) -> None:
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must be an http(s) URL such as 'http://127.0.0.1:8000/v1', got {base_url!r}")
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be the served model name, got {model!r}")
        positive_int("max_workers", max_workers)
        if number("timeout", timeout) <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        integer("max_retries", max_retries, 0)
        if integer("top_logprobs", top_logprobs, 1) > 20:
            raise ValueError(f"top_logprobs must be at most 20 (vLLM's default limit), got {top_logprobs!r}")
        self.base_url = base_url.rstrip("/")
        self._root = self.base_url.removesuffix("/v1")  # vLLM's /tokenize is not under /v1
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.max_workers = max_workers
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self.backoff = float(backoff)
        self.top_logprobs = top_logprobs
        self.name = name or f"openai:{model}"
        self._local = threading.local()
        self._checked = False
        self._plans: dict[tuple[str, tuple[str, ...]], tuple[str, list[str]]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenAILM(base_url={self.base_url!r}, model={self.model!r})"

    # -- HTTP ------------------------------------------------------------------------------
    def _session(self) -> requests.Session:
        """This thread's session. Requests to ``/chat/completions`` (:meth:`_post`) go through an adapter
        that retries them (requests picks the adapter of the longest matching prefix); ``/models`` and
        ``/tokenize`` are tried once."""
        if not hasattr(self._local, "session"):
            s = requests.Session()
            if self.api_key:
                s.headers["Authorization"] = f"Bearer {self.api_key}"
            # POSTs retried too (no side effects); out of retries, the last answer is reported by _post
            s.mount(f"{self.base_url}/chat/completions", HTTPAdapter(max_retries=Retry(
                total=self.max_retries, backoff_factor=self.backoff, status_forcelist=_RETRY_STATUS,
                allowed_methods=None, raise_on_status=False)))
            self._local.session = s
        return self._local.session

    def check_server(self) -> None:
        """One quick request to ``/models``; ConnectionError naming the URL when it fails."""
        try:
            r = self._session().get(f"{self.base_url}/models", timeout=min(self.timeout, 10.0))
        except requests.RequestException as exc:
            raise ConnectionError(
                f"cannot reach the OpenAI-compatible server at {self.base_url} ({type(exc).__name__}: {exc})"
            ) from exc
        if r.status_code >= 400:
            raise ConnectionError(
                f"the server at {self.base_url} answered {r.status_code} to GET /models: {r.text[:200]}"
            )
        served = [m.get("id") for m in r.json().get("data", [])]
        if served and self.model not in served:
            raise ValueError(f"model {self.model!r} is not served at {self.base_url}; it serves {served}")

    def _ensure_server(self) -> None:
        with self._lock:  # once, before the first request
            if not self._checked:
                self.check_server()
                self._checked = True

    def _post(self, url: str, payload: dict) -> dict:
        """POST ``/chat/completions`` (retried: see :meth:`_session`); errors name the URL once retries are spent."""
        try:
            r = self._session().post(url, json=payload, timeout=self.timeout)
        except (requests.ConnectionError, requests.Timeout) as exc:
            raise ConnectionError(f"request to {url} failed after {self.max_retries + 1} tries: {exc}") from exc
        if r.status_code >= 400:
            raise RuntimeError(f"{url} answered {r.status_code}: {r.text[:500]}")
        return r.json()

    def _map(self, fn, items: Sequence[Any], desc: str, progress: bool | str) -> list[Any]:
        """``fn`` over ``items`` on the worker threads; on Ctrl-C the requests not sent yet are dropped."""
        self._ensure_server()

        def call(item: Any) -> Any:
            check_interrupt()
            return fn(item)

        pool = ThreadPoolExecutor(max_workers=self.max_workers)
        try:
            return list(tqdm(pool.map(call, items), total=len(items), desc=progress_label(progress, desc),
                             disable=not progress))
        finally:
            pool.shutdown(cancel_futures=True)

    def _chat(self, conv: Conversation, prefix: str = "", **fields: Any) -> dict:
        """POST ``conv`` to ``/chat/completions`` (one greedy token unless ``fields`` say otherwise),
        continuing an assistant turn that starts with ``prefix`` where one is given."""
        body = {
            "model": self.model,
            "messages": list(conv) + ([{"role": "assistant", "content": prefix}] if prefix else []),
            "max_tokens": 1,
            "temperature": 0.0,
            **(_CONTINUE if prefix else {}),
            **fields,
        }
        return self._post(f"{self.base_url}/chat/completions", body)

    # -- generation ------------------------------------------------------------------------
    def generate(
        self,
        conversations: Sequence[Conversation],
        *,
        max_new_tokens: int = 64,
        temperature: float = 0.0,
        progress: bool | str = False,
        constraint: Constraint | Sequence[Constraint | None] | None = None,
    ) -> list[str]:
        """Complete each conversation (see :class:`~findbench.lm.base.LM`), under ``constraint``
        (one for all, or one or None per conversation)."""
        constraints = check_generate(conversations, max_new_tokens, temperature, constraint)

        def one(item):
            conv, c = item  # c: the constraint, sent as vLLM's structured_outputs field
            out = self._chat(conv, max_tokens=max_new_tokens, temperature=float(temperature),
                             **({} if c is None else {"structured_outputs": structured_outputs_field(c)}))
            return (out["choices"][0]["message"].get("content") or "").strip()

        return self._map(one, list(zip(conversations, constraints)), "generate", progress)

    # -- candidate log-probs ----------------------------------------------------------------
    def _tokenize(self, messages: list[dict], **options: Any) -> list[int] | None:
        """The token ids of ``messages`` (vLLM's ``/tokenize``, with ``options``); None where it fails."""
        try:
            r = self._session().post(f"{self._root}/tokenize", timeout=self.timeout,
                                     json={"model": self.model, "messages": messages, **options})
        except requests.RequestException:
            return None
        return r.json().get("tokens") if r.status_code < 400 else None

    def _plan(self, assistant_prefix: str, candidates: Sequence[str]) -> tuple[str, list[str]]:
        """(assistant text to continue, candidate token texts), as TransformersLM splits them
        (:func:`~findbench.lm.base.split_candidates`, tokenized by the server)."""
        key = (assistant_prefix, tuple(candidates))
        if key not in self._plans:
            probe = [{"role": "user", "content": "x"}]
            split = split_candidates(
                assistant_prefix, candidates,
                lambda text: self._tokenize(probe + [{"role": "assistant", "content": text}], **_CONTINUE),
            ) if assistant_prefix != assistant_prefix.rstrip() else None
            text = assistant_prefix if split is None else split[0]
            self._plans[key] = (text, [assistant_prefix[len(text) :] + c for c in candidates])
        return self._plans[key]

    def _exact_logprob(self, conv: Conversation, prefix: str, token_text: str) -> float:
        """Log-prob of ``token_text`` after the prefix, from the prompt's own log-probs."""
        out = self._chat(conv, prefix + token_text, prompt_logprobs=0)
        entries = out.get("prompt_logprobs")
        if not entries or not entries[-1]:
            log.warning(
                "server gives no prompt_logprobs; candidate %r outside the top %d counts as -inf",
                token_text,
                self.top_logprobs,
            )
            return -math.inf
        last = entries[-1]
        token_ids = out.get("prompt_token_ids")
        if token_ids and str(token_ids[-1]) in last:
            return float(last[str(token_ids[-1])]["logprob"])
        return next((float(e["logprob"]) for e in last.values() if e.get("decoded_token") == token_text), -math.inf)

    def candidate_logprobs(
        self,
        conversations: Sequence[Conversation],
        candidates: Sequence[str],
        *,
        assistant_prefix: str = "",
        progress: bool | str = False,
    ) -> list[list[float]]:
        """Next-token log-probabilities of each candidate (see :class:`~findbench.lm.base.LM`)."""
        check_candidates(conversations, candidates, assistant_prefix)
        if not conversations:
            return []
        self._ensure_server()
        prefix, token_texts = self._plan(assistant_prefix, candidates)

        def one(conv):
            out = self._chat(conv, prefix, logprobs=True, top_logprobs=self.top_logprobs)
            content = ((out["choices"][0].get("logprobs") or {}).get("content")) or []
            if not content:
                raise RuntimeError(
                    f"{self.base_url}/chat/completions returned no logprobs; does the server support logprobs?"
                )
            top = {t["token"]: float(t["logprob"]) for t in content[0].get("top_logprobs") or []}
            top.setdefault(content[0]["token"], float(content[0]["logprob"]))
            return [top[t] if t in top else self._exact_logprob(conv, prefix, t) for t in token_texts]

        return self._map(one, list(conversations), "candidate log-probs", progress)

    def continuation_logprobs(
        self, conversations: Sequence[Conversation], continuations: Sequence[str], *, progress: bool | str = False
    ) -> list[float]:
        """Log-probability of each continuation (see :class:`~findbench.lm.base.ScoringLM`), from the prompt's own
        log-probs after the prompt's tokens (vLLM's ``/tokenize``, once per prompt)."""
        continuations = check_continuations(conversations, continuations)
        if not conversations:
            return []
        url = f"{self.base_url}/chat/completions"
        lengths: dict[str, int] = {}  # a prompt tokenized twice by two threads is harmless

        def one(pair):
            conv, cont = pair
            key = repr(list(conv))
            if key not in lengths:
                tokens = self._tokenize(list(conv), add_generation_prompt=True)
                if tokens is None:
                    raise RuntimeError(f"{self._root}/tokenize failed; scoring continuations needs vLLM's /tokenize")
                lengths[key] = len(tokens)
            n_prompt = lengths[key]
            entries = self._chat(conv, cont, prompt_logprobs=0).get("prompt_logprobs")
            if not entries or len(entries) <= n_prompt:
                raise RuntimeError(
                    f"{url} returned no prompt_logprobs for the continuation; scoring continuations needs vLLM"
                )
            # prompt_logprobs=0: each entry holds the prompt's own token only
            if any(not entry or len(entry) != 1 for entry in entries[n_prompt:]):
                raise RuntimeError(f"{url}: unexpected prompt_logprobs entries {entries[n_prompt:]!r:.120}")
            return sum(float(next(iter(entry.values()))["logprob"]) for entry in entries[n_prompt:])

        return self._map(one, list(zip(conversations, continuations)), "continuation log-probs", progress)
