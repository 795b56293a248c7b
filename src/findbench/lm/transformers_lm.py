"""In-process transformers backend: batched chat generation and candidate log-probs.

Prompts are left padded with explicit position ids, so a padded row scores as the row alone; a
prefix shared by a group of conversations runs once and its KV cache is reused. ``generate(...,
constraint=...)`` masks the logits with xgrammar.
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Sequence
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel, StoppingCriteria, StoppingCriteriaList

from findbench._checks import positive_int
from findbench.lm.base import (
    INTERRUPT,
    Constraint,
    Conversation,
    check_candidates,
    check_continuations,
    check_generate,
    check_interrupt,
    split_candidates,
)
from findbench.lm.base import progress_label as _label

log = logging.getLogger(__name__)

#: Vicuna v1.1 conversation format ("USER: ... ASSISTANT:"), used when a tokenizer has no
#: chat template of its own (e.g. lmsys/vicuna-13b-v1.1, the judge of the FIND paper).
VICUNA_CHAT_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] + ' ' }}"
    "{% set loop_messages = messages[1:] %}{% else %}"
    "{{ 'A chat between a curious user and an artificial intelligence assistant. "
    "The assistant gives helpful, detailed, and polite answers to the user\\'s questions. ' }}"
    "{% set loop_messages = messages %}{% endif %}"
    "{% for message in loop_messages %}"
    "{% if message['role'] == 'user' %}{{ 'USER: ' + message['content'] + ' ' }}"
    "{% elif message['role'] == 'assistant' %}{{ 'ASSISTANT: ' + message['content'] + eos_token }}{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}{{ 'ASSISTANT:' }}{% endif %}"
)


#: Tokens a group's shared prefix may lose when one more conversation joins it.
_MAX_SHRINK = 8


class _StopOnInterrupt(StoppingCriteria):
    """Ends a generation at the next token once :data:`INTERRUPT` is set."""

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        return torch.full((input_ids.shape[0],), INTERRUPT.is_set(), dtype=torch.bool, device=input_ids.device)


def _batches(items: Sequence[Any], size: int):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _packs(groups: list[tuple[list[int], Any]], batch_size: int):
    """Consecutive ``(members, ...)`` groups, packed: at most ``batch_size`` groups and
    ``4 * batch_size`` members a pack."""
    pack: list[tuple[list[int], Any]] = []
    for g in groups:
        if pack and (len(pack) >= batch_size or sum(len(m) for m, _ in pack) + len(g[0]) > 4 * batch_size):
            yield pack
            pack = []
        pack.append(g)
    if pack:
        yield pack


def left_pad(token_lists: Sequence[Sequence[int]], pad: int) -> tuple[Any, Any]:
    """``(ids, mask)`` of ``token_lists`` left padded to one width."""
    from torch.nn.utils.rnn import pad_sequence

    rows = [torch.tensor(list(t), dtype=torch.long) for t in token_lists]
    return (pad_sequence(rows, batch_first=True, padding_value=pad, padding_side="left"),
            pad_sequence([torch.ones_like(r) for r in rows], batch_first=True, padding_side="left"))


class TransformersLM:
    """An :class:`~findbench.lm.base.LM` running a causal LM in this process.

    Args:
        model: ``"embedded"``, a local folder, a Hub id or a loaded ``PreTrainedModel`` (then
            ``tokenizer`` is required).
        device: default CUDA when available.
        dtype: torch dtype or its name; default float32 on CPU, bfloat16 on CUDA.
        chat_template: overrides the tokenizer's (default Vicuna v1.1 where it has none).
    """

    #: ``generate`` takes ``constraint=`` (xgrammar); structured outputs ``auto`` applies them here.
    supports_constraints = True
    in_process = True

    def __init__(self, model: Any = "embedded", *, tokenizer: Any = None, device: str | None = None, dtype: Any = None,
                 batch_size: int = 16, chat_template: str | None = None, name: str | None = None) -> None:
        self.batch_size = positive_int("batch_size", batch_size)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        if dtype is None:  # a name is turned into a torch dtype by load_causal_lm
            dtype = torch.bfloat16 if self.device.type == "cuda" else torch.float32

        if isinstance(model, PreTrainedModel) or hasattr(model, "get_base_model"):  # a model or a peft model
            if tokenizer is None:
                raise ValueError("tokenizer is required when model is an already loaded model")
            self.model = model.to(self.device)
            model_id = getattr(model.config, "_name_or_path", "") or type(model).__name__
        elif isinstance(model, (str, os.PathLike)):
            from findbench.models import load_causal_lm

            model_id = os.fspath(model)
            self.model, own = load_causal_lm(model_id, dtype=dtype, device=str(self.device))
            tokenizer = own if tokenizer is None else tokenizer
        else:
            raise TypeError(f"model must be a name, path or PreTrainedModel, got {type(model).__name__}")
        self.model.eval()
        self.tokenizer = copy.copy(tokenizer)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        if chat_template is not None:
            self.tokenizer.chat_template = chat_template
        elif not getattr(self.tokenizer, "chat_template", None):
            log.warning("tokenizer of %s has no chat template; using the Vicuna v1.1 format", model_id)
            self.tokenizer.chat_template = VICUNA_CHAT_TEMPLATE
        self.name = name or f"transformers:{model_id}"
        #: Number of tokens run through the model by candidate_logprobs (for benchmarks).
        self.tokens_forwarded = 0
        self._grammar_compiler: Any = None
        self._grammars: dict[Constraint, Any] = {}

    def __repr__(self) -> str:
        return f"TransformersLM(name={self.name!r}, device={str(self.device)!r}, batch_size={self.batch_size})"

    # -- rendering -------------------------------------------------------------------------
    def render(self, conversation: Conversation, assistant_prefix: str = "") -> str:
        """The prompt text of one conversation: chat template + generation prompt + prefix."""
        return self.tokenizer.apply_chat_template(
            list(conversation), tokenize=False, add_generation_prompt=True) + assistant_prefix

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    # -- generation ------------------------------------------------------------------------
    def _compiled(self, constraint: Constraint) -> Any:
        """The xgrammar grammar of ``constraint`` for this tokenizer (compiled once)."""
        if constraint not in self._grammars:
            import xgrammar as xgr  # a dependency of findbench

            if self._grammar_compiler is None:
                vocab = self.model.get_output_embeddings().weight.shape[0]  # logits width (may exceed len(tokenizer))
                eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
                eos = self.tokenizer.eos_token_id if eos is None else eos
                stop = [eos] if isinstance(eos, int) else list(eos)
                info = xgr.TokenizerInfo.from_huggingface(self.tokenizer, vocab_size=vocab, stop_token_ids=stop)
                self._grammar_compiler = xgr.GrammarCompiler(info)
            # compact JSON: with any whitespace allowed, a small model can fill the token limit with it
            self._grammars[constraint] = (
                self._grammar_compiler.compile_regex(constraint.regex) if constraint.regex is not None
                else self._grammar_compiler.compile_json_schema(constraint.json_schema, any_whitespace=False))
        return self._grammars[constraint]

    def generate(self, conversations: Sequence[Conversation], *, max_new_tokens: int = 64, temperature: float = 0.0,
                 progress: bool | str = False,
                 constraint: Constraint | Sequence[Constraint | None] | None = None) -> list[str]:
        """Complete each conversation (see :class:`~findbench.lm.base.LM`), under ``constraint``
        (one for all, or one or None per conversation)."""
        constraints = check_generate(conversations, max_new_tokens, temperature, constraint)
        texts = [self.render(c) for c in conversations]
        # free conversations first, then constrained ones; by length within each
        order = sorted(range(len(texts)), key=lambda i: (constraints[i] is not None, len(texts[i])))
        batches = [
            idx
            for part in (False, True)
            for idx in _batches([i for i in order if (constraints[i] is not None) == part], self.batch_size)
        ]
        out: dict[int, str] = {}
        sampling = {"temperature": float(temperature)} if temperature > 0 else {
            "temperature": None, "top_p": None, "top_k": None}
        with tqdm(total=len(texts), desc=_label(progress, "generate"), disable=not progress) as bar:
            for idx in batches:
                check_interrupt()
                enc = self.tokenizer([texts[i] for i in idx], return_tensors="pt", padding=True,
                                     add_special_tokens=False).to(self.device)
                kwargs: dict[str, Any] = {"do_sample": temperature > 0, "max_new_tokens": max_new_tokens,
                                          "stopping_criteria": StoppingCriteriaList([_StopOnInterrupt()]), **sampling}
                if constraints[idx[0]] is not None:
                    from xgrammar.contrib.hf import LogitsProcessor

                    # one processor per generate call (it keeps a matcher per row)
                    kwargs["logits_processor"] = [LogitsProcessor([self._compiled(constraints[i]) for i in idx])]
                with torch.no_grad():
                    gen = self.model.generate(**enc, pad_token_id=self.tokenizer.pad_token_id, **kwargs)
                check_interrupt()  # a generation cut by Ctrl-C is never returned
                new = self.tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
                out.update(zip(idx, (text.strip() for text in new)))
                bar.update(len(idx))
        return [out[i] for i in range(len(texts))]

    # -- candidate log-probs ----------------------------------------------------------------
    def candidate_logprobs(
        self,
        conversations: Sequence[Conversation],
        candidates: Sequence[str],
        *,
        assistant_prefix: str = "",
        progress: bool | str = False,
        shared_prefix: bool = False,
        min_shared_tokens: int = 16,
    ) -> list[list[float]]:
        """Next-token log-probabilities of each candidate (see :class:`~findbench.lm.base.LM`).

        With ``shared_prefix=True``, consecutive conversations sharing at least ``min_shared_tokens``
        leading tokens form a group whose shared tokens run once (equal to the plain path up to
        float error).
        """
        check_candidates(conversations, candidates, assistant_prefix)
        if not conversations:
            return []
        splits = [split_candidates(self.render(c, assistant_prefix), candidates, self._encode) for c in conversations]
        if None in splits:
            raise ValueError(
                f"candidates must each be one token after the prompt; {list(candidates)!r} are not "
                f"for tokenizer {type(self.tokenizer).__name__}"
            )
        cand_ids = splits[0][1]
        if any(ids != cand_ids for _, ids in splits):
            raise ValueError("candidates tokenize differently across conversations; use a fixed assistant_prefix")
        token_lists = [self._encode(ctx) for ctx, _ in splits]
        return (self._logprobs_shared(token_lists, cand_ids, progress, min_shared_tokens) if shared_prefix
                else self._logprobs_plain(token_lists, cand_ids, progress))

    def _last_logprobs(self, logits, cand_ids: list[int]) -> list[list[float]]:
        return torch.log_softmax(logits.float(), dim=-1)[:, cand_ids].tolist()

    def _logprobs_plain(
        self, token_lists: list[list[int]], cand_ids: list[int], progress: bool | str
    ) -> list[list[float]]:
        order = sorted(range(len(token_lists)), key=lambda i: len(token_lists[i]))
        out: dict[int, list[float]] = {}
        with tqdm(total=len(token_lists), desc=_label(progress, "candidate log-probs"), disable=not progress) as bar:
            for idx in _batches(order, self.batch_size):
                check_interrupt()
                ids, mask = left_pad([token_lists[i] for i in idx], self.tokenizer.pad_token_id)
                with torch.no_grad():
                    logits = self.model(
                        input_ids=ids.to(self.device),
                        attention_mask=mask.to(self.device),
                        position_ids=(mask.cumsum(-1) - 1).clamp(min=0).to(self.device),
                        use_cache=False,
                        logits_to_keep=1,
                    ).logits[:, -1, :]
                self.tokens_forwarded += int(mask.sum())
                out.update(zip(idx, self._last_logprobs(logits, cand_ids)))
                bar.update(len(idx))
        return [out[i] for i in range(len(token_lists))]

    def _logprobs_shared(
        self, token_lists: list[list[int]], cand_ids: list[int], progress: bool | str, min_shared: int
    ) -> list[list[float]]:
        groups: list[tuple[list[int], int]] = []  # (member indices, shared length)
        for i, toks in enumerate(token_lists):
            if groups:
                members, shared = groups[-1]
                first, limit = token_lists[members[0]], min(shared, len(toks) - 1)
                n = next((j for j in range(limit) if first[j] != toks[j]), limit)
                # join while the shared prefix stays long (a new function's prompt shares only the system prompt)
                if (
                    n >= min_shared
                    and len(members) < self.batch_size
                    and (len(members) == 1 or n >= shared - _MAX_SHRINK)
                ):
                    members.append(i)
                    groups[-1] = (members, n)
                    continue
            groups.append(([i], len(toks) - 1))
        # a group of several shares at least min_shared tokens (each joined so); one alone runs the plain path
        alone = [members[0] for members, _ in groups if len(members) == 1]
        multi = [g for g in groups if len(g[0]) > 1]
        with tqdm(total=len(token_lists), desc=_label(progress, "candidate log-probs (shared prefix)"),
                  disable=not progress) as bar:
            out = dict(zip(alone, self._logprobs_plain([token_lists[i] for i in alone], cand_ids, False)))
            bar.update(len(alone))
            # several groups per pack: their prefixes in one forward, then all their suffixes over the caches
            for pack in _packs(multi, self.batch_size):
                check_interrupt()
                prefixes = [token_lists[members[0]][:shared] for members, shared in pack]
                rows = [(g, token_lists[i][shared:]) for g, (members, shared) in enumerate(pack) for i in members]
                _, logits = self._prefix_suffix_forward(prefixes, rows, suffix_logits_to_keep=1)
                out.update(zip([i for m, _ in pack for i in m], self._last_logprobs(logits[:, -1, :], cand_ids)))
                bar.update(len(rows))
        return [out[i] for i in range(len(token_lists))]

    def _prefix_suffix_forward(
        self, prefixes: list[list[int]], rows: list[tuple[int, list[int]]], *, suffix_logits_to_keep: int = 0
    ) -> tuple[Any, Any]:
        """Run every prefix once, give each row ``(prefix index, suffix ids)`` a copy of its prefix's
        KV cache and run the suffixes over it. Returns the logits at each row's prefix end ``(R, V)``
        and the suffix logits ``(R, S, V)`` (the last ``suffix_logits_to_keep`` columns; 0: all).
        """
        p_ids, p_mask = left_pad(prefixes, self.tokenizer.pad_token_id)
        s_ids, s_mask = left_pad([suf for _, suf in rows], self.tokenizer.pad_token_id)
        owner = torch.tensor([g for g, _ in rows])
        prefix_len = torch.tensor([len(p) for p in prefixes])[owner]
        positions = prefix_len[:, None] + (s_mask.cumsum(-1) - 1).clamp(min=0)
        dev = self.device
        with torch.no_grad():
            first = self.model(
                input_ids=p_ids.to(dev),
                attention_mask=p_mask.to(dev),
                position_ids=(p_mask.cumsum(-1) - 1).clamp(min=0).to(dev),
                use_cache=True,
                logits_to_keep=1,
            )
            cache = first.past_key_values
            cache.batch_select_indices(owner.to(dev))  # one cache row per suffix
            logits = self.model(
                input_ids=s_ids.to(dev),
                attention_mask=torch.cat([p_mask[owner], s_mask], dim=1).to(dev),
                position_ids=positions.to(dev),
                past_key_values=cache,
                use_cache=True,
                logits_to_keep=suffix_logits_to_keep,
            ).logits
        self.tokens_forwarded += int(p_mask.sum()) + int(s_mask.sum())
        return first.logits[:, -1, :][owner.to(dev)], logits

    # -- whole continuations ---------------------------------------------------------------
    def continuation_logprobs(
        self, conversations: Sequence[Conversation], continuations: Sequence[str], *, progress: bool | str = False
    ) -> list[float]:
        """Log-probability of each continuation (see :class:`~findbench.lm.base.ScoringLM`); consecutive
        conversations with the same prompt run it once."""
        continuations = check_continuations(conversations, continuations)
        if not conversations:
            return []
        groups: list[tuple[list[int], list[int]]] = []  # (member indices, prompt ids)
        last_text = None
        for i, conv in enumerate(conversations):
            text = self.render(conv)
            if text == last_text and len(groups[-1][0]) < 4 * self.batch_size:
                groups[-1][0].append(i)
            else:
                groups.append(([i], self._encode(text)))
                last_text = text
        conts = [self._encode(c) for c in continuations]
        out: dict[int, float] = {}
        with tqdm(total=len(conversations), desc=_label(progress, "continuation log-probs"),
                  disable=not progress) as bar:
            for pack in _packs(groups, self.batch_size):
                check_interrupt()
                out.update(zip([i for m, _ in pack for i in m], self._continuation_pack(pack, conts)))
                bar.update(sum(len(m) for m, _ in pack))
        return [out[i] for i in range(len(conversations))]

    def _continuation_pack(self, pack: list[tuple[list[int], list[int]]], conts: list[list[int]]) -> list[float]:
        """Summed log-probs of the continuations of every member of the groups in ``pack``."""
        rows = [(g, conts[i]) for g, (members, _) in enumerate(pack) for i in members]
        first, logits = self._prefix_suffix_forward([p for _, p in pack], rows)
        s_width = logits.shape[1]
        head = torch.log_softmax(first.float(), dim=-1)  # predicts each first token
        body = torch.log_softmax(logits[:, :-1, :].float(), dim=-1)  # column j predicts column j + 1
        out = []
        for r, (_, c) in enumerate(rows):  # the continuation ends its row: its columns are the last len(c)
            rest = body[r, torch.arange(s_width - len(c), s_width - 1), torch.tensor(c[1:], dtype=torch.long)]
            out.append(float(head[r, c[0]] + rest.sum()))  # a one-token continuation: rest is empty, sums to 0
        return out
