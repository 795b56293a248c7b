"""Observational test sets for one neuron of any Hugging Face causal LM (Huang et al. 2023).

Given a model under study, a (layer, neuron) of its MLP and an explanation E:

1. *Explanation block*: a generator LM lists about 20 strings in E's denotation and writes a
   sentence around each (``"Here is an example: <string>."`` when it leaves the string out,
   recorded in ``sentence_source``).
2. *Activating block*: the neuron's top-activating word per sentence of a corpus (default: 83
   short sentences shipped with findbench), judged in or out of E's denotation by the generator
   LM (Yes/No log-probabilities), a regular expression (``"regex:<pattern>"``) or a callable.
3. Every item records the span's per-token activations; ``fires`` is max > 0 and ``label`` the
   paper's TP/FP/FN/TN.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from findbench import _checks
from findbench import sites as acts
from findbench.neuron_explanations.intervention_tasks import overlapping, token_offsets
from findbench.resources import data_path

log = logging.getLogger(__name__)

DEFAULT_CORPUS = data_path("neurons", "corpus.txt")


def load_corpus(corpus=None) -> list[str]:
    """Sentences of ``corpus`` (default :data:`DEFAULT_CORPUS`): a list of strings or a text
    file with one sentence per line (``#`` lines are comments)."""
    if corpus is None or isinstance(corpus, (str, Path)):
        path = Path(corpus) if corpus is not None else DEFAULT_CORPUS
        if not path.is_file():
            raise FileNotFoundError(f"corpus: {path} is not a file")
        sents = [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()
                 if ln.strip() and not ln.lstrip().startswith("#")]
    else:
        sents = list(corpus)
        if not all(isinstance(s, str) for s in sents):
            raise ValueError("corpus must be a list of strings or a path")
        sents = [s.strip() for s in sents if s.strip()]
    if not sents:
        raise ValueError("corpus has no sentences")
    return sents


#: The paper's label of an item: (in the explanation's denotation, the neuron fires) -> label.
_LABELS = {(True, True): "true_positive", (True, False): "false_positive",
           (False, True): "false_negative", (False, False): "true_negative"}


def label_for(in_explanation: bool, fires: bool) -> str:
    """The paper's label of an item."""
    return _LABELS[bool(in_explanation), bool(fires)]


_BULLET = re.compile(r"^\s*(?:[-*\u2022]+|\d+[.)]|[a-z][.)])\s*", re.I)


def parse_list(text: str, limit: int) -> list[str]:
    """Items of an LM-written list: one per line (or comma separated on one line), bullets
    and numbering, a lead-in ending in ": " and surrounding quotes removed, headings dropped,
    de-duplicated case-insensitively."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    lines = lines[0].split(",") if len(lines) == 1 and "," in lines[0] else lines
    out: dict[str, str] = {}  # the first spelling of each item, by its lower case
    for ln in lines:
        if ln.rstrip().endswith(":"):  # a heading such as "Here are some examples:"
            continue
        # bullets off, then what follows a lead-in ("The days of the week are: Monday" -> "Monday"), unquoted
        item = _BULLET.sub("", ln).strip().rsplit(": ", 1)[-1].strip().strip("\"'`").strip().rstrip(".;").strip()
        if not item or len(item) > 40:
            continue
        out.setdefault(item.lower(), item)
        if len(out) >= limit:
            break
    return list(out.values())


@torch.no_grad()
def _neuron_values(model, token_lists: Sequence[Sequence[int]], layer: int, neuron: int) -> list[list[float]]:
    device = next(model.parameters()).device
    return [acts.record(model, torch.tensor([list(ids)], device=device), layer=layer, site="mlp_activation",
                        neurons=[neuron])[0, :, 0].float().tolist() for ids in token_lists]


def top_activating_spans(
    model, tokenizer, corpus: Sequence[str], *, layer: int, neuron: int, k: int = 20
) -> list[dict]:
    """Per sentence the word with the highest max-token activation; the ``k`` best sentences (ties: corpus order)."""
    encs = [token_offsets(tokenizer, s) for s in corpus]
    values = _neuron_values(model, [e[0] for e in encs], layer, neuron)
    found = []  # (-top activation, sentence index, item)
    for s_i, (sent, (ids, offsets), vals) in enumerate(zip(corpus, encs, values)):
        words = [(m, pos) for m in re.finditer(r"\w+(?:['\-]\w+)*", sent)
                 if (pos := overlapping(offsets, m.start(), m.end()))]
        if words:  # the first of the words whose top token activation is highest
            m, pos = max(words, key=lambda w: max(vals[i] for i in w[1]))
            item = {"sentence": sent, "span": m.group(0), "start": m.start(), "end": m.end(),
                    "span_tokens": [tokenizer.decode([ids[i]]) for i in pos], "activations": [vals[i] for i in pos]}
            found.append((-max(item["activations"]), s_i, item))
    return [item for *_, item in sorted(found, key=lambda f: f[:2])[:k]]


def make_judge(judge, explanation: str, lm=None) -> Callable[[str, str], bool]:
    """A ``(span, sentence) -> bool`` denotation judge from ``"lm"``, ``"regex:<pattern>"``
    or a callable."""
    if callable(judge):
        return judge
    if isinstance(judge, str) and judge.startswith("regex:"):
        try:
            pat = re.compile(judge[len("regex:") :], re.I)
        except re.error as exc:
            raise ValueError(f"judge: bad regular expression: {exc}") from exc
        return lambda span, sentence: bool(pat.search(span))
    if judge == "lm":
        if lm is None:
            raise ValueError("judge='lm' needs a generator LM")

        def ask(span: str, sentence: str) -> bool:
            conv = [
                {
                    "role": "user",
                    "content": f'Description: {explanation}\nSentence: "{sentence}"\n'
                    f'Does the word "{span}" in this sentence match the description? Answer Yes or No.',
                }
            ]
            yes, no = lm.candidate_logprobs([conv], ["Yes", "No"])[0]
            return yes > no

        return ask
    raise ValueError(f"judge must be 'lm', 'regex:<pattern>' or a callable, got {judge!r}")


def observational_rows(
    model,
    tokenizer,
    *,
    layer: int,
    neuron: int,
    explanation: str,
    generator=None,
    judge="lm",
    corpus=None,
    n_strings: int = 20,
    n_activating: int = 20,
    model_name: str = "",
    max_new_tokens: int = 160,
    progress: bool = False,
) -> list[dict]:
    """Rows of the ``observational`` config for one MLP neuron of a causal LM (see the module docstring).

    ``generator``: an :class:`~findbench.lm.base.LM` or spec (default ``"embedded"``) writing the
    strings and sentences, and judging with ``judge="lm"``.
    """
    from tqdm.auto import tqdm

    from findbench.lm import load_lm

    if not isinstance(explanation, str) or not explanation.strip():
        raise ValueError("explanation must be a non-empty string")
    acts.site_module(model, "mlp_activation", layer)
    width = acts.site_dim(model, "mlp_activation")
    if _checks.integer("neuron", neuron, 0) >= width:
        raise ValueError(f"neuron must be in [0, {width}), got {neuron}")
    _checks.positive_int("n_strings", n_strings)
    _checks.positive_int("n_activating", n_activating)
    sents = load_corpus(corpus)
    lm = load_lm("embedded" if generator is None else generator)
    judge_fn = make_judge(judge, explanation, lm)
    base = {"neuron": f"{layer}:{neuron}", "layer": layer, "neuron_index": neuron, "explanation": explanation,
            "model": model_name}

    ask_list = [
        {
            "role": "user",
            "content": f"List {n_strings} different words or short phrases that match this description: {explanation}\n"
            "Write one per line, with no numbering and no other text.",
        }
    ]
    strings = parse_list(lm.generate([ask_list], max_new_tokens=max_new_tokens)[0], n_strings)
    if not strings:
        log.warning("the generator listed no strings for %r", explanation)
    convs = [
        [
            {
                "role": "user",
                "content": f'Write one short sentence that contains the phrase "{s}". Reply with the sentence only.',
            }
        ]
        for s in strings
    ]
    written = lm.generate(convs, max_new_tokens=48, progress=progress) if convs else []
    items = []  # (sentence, span, its tokens, their activations, in the explanation, block, sentence source, judge)
    for s, text in tqdm(list(zip(strings, written)), desc="explanation items", disable=not progress):
        sentence = text.strip().splitlines()[0].strip() if text.strip() else ""
        at = sentence.lower().find(s.lower())
        source = "generated" if at >= 0 else "template"
        if at < 0:  # the generator left the string out: the template holds it
            sentence = f"Here is an example: {s}."
            at = sentence.find(s)
        ids, offsets = token_offsets(tokenizer, sentence)
        pos = overlapping(offsets, at, at + len(s))
        if not pos:
            raise ValueError(f"span [{at}, {at + len(s)}) of {sentence!r} covers no token")
        vals = _neuron_values(model, [ids], layer, neuron)[0]
        items.append((sentence, sentence[at : at + len(s)], [tokenizer.decode([ids[i]]) for i in pos],
                      [vals[i] for i in pos], True, "explanation", source, ""))
    judge_name = judge if isinstance(judge, str) else getattr(judge, "__name__", "callable")
    for item in tqdm(
        top_activating_spans(model, tokenizer, sents, layer=layer, neuron=neuron, k=n_activating),
        desc="activating items",
        disable=not progress,
    ):
        items.append((item["sentence"], item["span"], item["span_tokens"], item["activations"],
                      bool(judge_fn(item["span"], item["sentence"])), "activating", "corpus", judge_name))
    return [
        {
            **base,
            "sentence": sentence,
            "span": span,
            "span_tokens": tokens,
            "activations": values,
            "max_activation": max(values),
            "in_explanation": inside,
            "fires": (fires := max(values) > 0),
            "label": label_for(inside, fires),
            "block": block,
            "sentence_source": source,
            "judge": judged_by,
            "item_index": i,
        }
        for i, (sentence, span, tokens, values, inside, block, source, judged_by) in enumerate(items)
    ]
