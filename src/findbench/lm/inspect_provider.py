"""findbench LMs as Inspect models, the inverse of :mod:`findbench.lm.inspect_lm`: the model API
``findbench`` (``--model findbench/<spec>``, :class:`FindbenchModelAPI`; ``-M cache=<file>``: sqlite
request cache; ``-M lm=<instance>`` from Python) and the Inspect model name of an interpreter spec."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from pathlib import Path
from typing import Any

from inspect_ai.model import ChatMessage, GenerateConfig, ModelAPI, ModelOutput, ModelUsage, modelapi
from inspect_ai.tool import ToolChoice, ToolInfo

from findbench.lm.base import DEFAULT_MAX_TOKENS, Constraint, count_tokens, use_structured_outputs


class FindbenchModelAPI(ModelAPI):
    """Inspect's view of a findbench LM (``--model findbench/<spec>``).

    Model args (``-M``): ``cache`` (sqlite file), ``model`` (served name, for URL specs), ``lm`` (an LM
    instance) and options of :func:`findbench.lm.load_lm`. Token usage uses the backend's tokenizer
    where it has one, else 4 characters a token. The LM is loaded on the first ``generate`` (Inspect
    also builds providers only to look up model information)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),
        **model_args: Any,
    ) -> None:
        super().__init__(model_name, base_url, api_key, [], config)
        self._cache = model_args.pop("cache", None)
        lm = model_args.pop("lm", None)
        if base_url is not None:
            model_args.setdefault("model", model_name)
        self.spec = lm if lm is not None else (base_url or model_name)  #: the findbench LM spec (or LM)
        self._options = model_args
        self._lm: Any = None
        self._load_lock = threading.Lock()
        self._lock: Any = contextlib.nullcontext()  # a threading.Lock once a non-thread-safe LM is loaded

    @property
    def loaded(self) -> bool:
        """Whether the findbench LM is loaded."""
        return self._lm is not None

    @property
    def lm(self) -> Any:
        """The findbench LM (loaded on first use)."""
        with self._load_lock:
            if self._lm is None:
                from findbench.lm import load_lm
                from findbench.lm.openai_lm import OpenAILM

                self._lm = load_lm(self.spec, cache=self._cache, **self._options)
                if not isinstance(getattr(self._lm, "inner", self._lm), OpenAILM):  # (a CachedLM's inner LM)
                    self._lock = threading.Lock()
            return self._lm

    def max_tokens(self) -> int | None:
        return DEFAULT_MAX_TOKENS

    def close(self) -> None:
        close = getattr(self._lm, "close", None)
        if callable(close):
            close()

    def _count(self, text: str) -> int:
        lm = self.lm
        with self._lock:
            return count_tokens(lm, text)

    async def count_text_tokens(self, text: str) -> int:
        return await asyncio.to_thread(self._count, text)

    def _generate(
        self, messages: list[dict[str, str]], limit: int, temperature: float, constraint: Any
    ) -> tuple[str, int, int]:
        lm = self.lm
        kwargs = {"constraint": constraint} if constraint is not None else {}
        with self._lock:
            text = lm.generate([messages], max_new_tokens=limit, temperature=temperature, **kwargs)[0]
            return text, count_tokens(lm, conversation=messages), count_tokens(lm, text)

    async def generate(
        self, input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> ModelOutput:
        if tools or any(m.role == "tool" or getattr(m, "tool_calls", None) for m in input):
            raise ValueError(
                f"findbench/{self.model_name} takes FIND's text protocol only: findbench's own models do not "
                "support tool calls; run the text protocol (-T protocol=text, findbench interpret --protocol text) "
                "or, for the tools protocol, an Inspect provider whose models support tool calls"
            )
        messages = [{"role": m.role, "content": m.text} for m in input]  # text only: no tool messages here
        field = (config.extra_body or {}).get("structured_outputs")
        constraint = None
        if field:  # vLLM's request field, as the text loop (or a caller) sends it
            constraint = Constraint(regex=field["regex"]) if "regex" in field else Constraint(json_schema=field["json"])
            if not getattr(self.lm, "supports_constraints", False):
                raise ValueError(f"structured_outputs: findbench/{self.model_name} cannot constrain generation")
        text, n_in, n_out = await asyncio.to_thread(
            self._generate, messages, config.max_tokens or DEFAULT_MAX_TOKENS, float(config.temperature or 0.0),
            constraint,
        )
        output = ModelOutput.from_content(model=self.model_name, content=text)
        output.usage = ModelUsage(input_tokens=n_in, output_tokens=n_out, total_tokens=n_in + n_out)
        return output


@modelapi(name="findbench")
def findbench_model_api() -> type[ModelAPI]:
    """The ``findbench`` model API (``--model findbench/<spec>``)."""
    return FindbenchModelAPI


def inspect_model_name(spec: str) -> str:
    """The Inspect model of an LM spec: ``<provider>/<model>`` as is when Inspect knows the provider;
    any other spec (``embedded``, a folder, a Hub id, a URL) as ``findbench/<spec>``."""
    head, sep, _ = spec.partition("/")
    known = sep and head and not spec.startswith(("http://", "https://")) and not Path(spec).exists()
    return spec if known and is_inspect_provider(head) else f"findbench/{spec}"


def structured_outputs_applied(model: Any, setting: str) -> bool:
    """Whether ``text`` turns on the Inspect ``model`` follow the turn grammar: a findbench model as
    :func:`~findbench.lm.base.use_structured_outputs` says, any other with ``on``."""
    api = getattr(model, "api", None)
    return use_structured_outputs(api.lm, setting) if isinstance(api, FindbenchModelAPI) else setting == "on"


def is_inspect_provider(name: str) -> bool:
    """Whether Inspect has a model API ``name`` (``findbench``: this module),
    by its public ``registry_create``: an unknown name is a LookupError; a known provider's class,
    given no model name, fails to bind its arguments (TypeError) or asks for its optional package first."""
    from inspect_ai.util import registry_create

    if name == "findbench":
        return True
    try:
        registry_create("modelapi", name)
    except LookupError:
        return False
    except Exception:  # found: its class refused to be built without a model name
        return True
    return True
