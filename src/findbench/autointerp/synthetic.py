"""A ``synthetic`` SAE whose latents are planted rules over tokens, with known explanations.

Each latent fires on the tokens one rule picks out (digits, capitalised words, "the", ...), so
the AutoInterp pipeline can be checked on it (:mod:`findbench.autointerp.validation`).

The SAE reads ``hook_embed``: encoding recovers an input row's token id exactly by hashing its
float32 bits; latent ``j`` on token ``t`` is ``1 + 0.5 * (r mod 10) / 10`` where the rule holds
(``r``: the token's rank among the rule's tokens), else 0. A *word* is a token that starts a
word (leading space, no ``##``, or a first capital), compared in lower case.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from findbench import _checks
from findbench.autointerp.corpus import special_token_ids
from findbench.autointerp.prompts import TokenRenderer
from findbench.resources import data_path

log = logging.getLogger(__name__)

#: The hook the synthetic SAE reads (the input embeddings).
HOOK_NAME = "hook_embed"


@dataclass(frozen=True)
class TokenInfo:
    """What a rule sees of one token (``cased``: whether the tokenizer keeps case at all)."""

    piece: str
    stripped: str
    word_start: bool
    cased: bool

    @property
    def lower(self) -> str:
        return self.stripped.lower()


@dataclass(frozen=True)
class Rule:
    """A planted feature: ``name``, the true ``explanation`` (after "This neuron activates on") and ``fires``."""

    name: str
    explanation: str
    fires: Callable[[TokenInfo], bool] = field(compare=False, repr=False)
    #: tokenizers without upper case (BERT uncased) cannot express it
    needs_case: bool = False


def _words(words: Sequence[str]) -> Callable[[TokenInfo], bool]:
    wanted = frozenset(w.lower() for w in words)
    return lambda t: t.word_start and t.lower in wanted


_COLOURS = (
    "red",
    "orange",
    "yellow",
    "green",
    "blue",
    "purple",
    "violet",
    "pink",
    "brown",
    "black",
    "white",
    "grey",
    "gray",
    "scarlet",
    "crimson",
)
_PRONOUNS = ("he", "she", "it", "they", "him", "her", "them", "his", "hers", "its", "their", "theirs")
_DAYS_MONTHS = (
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
    "january",
    "february",
    "april",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)  # not "may" / "march": verbs too
_NUMBER_WORDS = (
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "twenty",
    "hundred",
    "thousand",
    "million",
    "first",
    "second",
    "third",
)

#: The FIND entity concept of the default ``birds`` rule: its single-word entries are common
#: single tokens, and frequent in WordNet's glosses (about 400 in 200k tokens).
DEFAULT_ENTITY = "birds and ornithology"


def entity_rule(concept: str, name: str | None = None, explanation: str | None = None) -> Rule:
    """A rule firing on the single-token words of a FIND entity concept (``entities.json``)."""
    with data_path("entities.json").open(encoding="utf-8") as fh:
        entities = json.load(fh)["entities"]
    if concept not in entities:
        raise ValueError(
            f"rules: no FIND entity concept {concept!r} in entities.json (known: {', '.join(sorted(entities))})"
        )
    words = [w for w in entities[concept] if " " not in w and "-" not in w]
    return Rule(name or f"entity:{concept}", explanation or f"words about {concept}, such as {', '.join(words[:6])}",
                _words(words))


#: Every named rule. ``entity:<FIND concept>`` names any other concept (:func:`get_rule`).
RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule("digits", "numbers written with digits, such as 1, 15 or 2000",
             lambda t: bool(t.stripped) and all(c in "0123456789" for c in t.stripped)),
        Rule("capitalized", "words that start with a capital letter",
             lambda t: t.word_start and "A" <= t.stripped[:1] <= "Z", needs_case=True),
        Rule("ing", 'words and word pieces containing the letters "ing", as in "running" or "thing"',
             lambda t: "ing" in t.lower),
        Rule("brackets", "brackets and parentheses, opening or closing, such as ( ) [ ]",
             lambda t: any(c in "()[]{}" for c in t.stripped)),
        Rule("closing_bracket", "closing brackets and parentheses, such as ) and ]",
             lambda t: any(c in ")]}" for c in t.stripped)),
        entity_rule(DEFAULT_ENTITY, "birds", "words about birds, such as bird, eagle, owl, sparrow, feathers and nest"),
        Rule("colours", "colour words such as red, green, blue, black and white", _words(_COLOURS)),
        Rule("pronouns", "personal pronouns such as he, she, it, they, his and their", _words(_PRONOUNS)),
        Rule("articles", 'the articles "the", "a" and "an"', _words(["the", "a", "an"])),
        Rule("the", 'the word "the"', _words(["the"])),
        Rule("days_months", "names of days of the week and months, such as Monday or October", _words(_DAYS_MONTHS)),
        Rule("number_words", "numbers written as words, such as one, two, ten or first", _words(_NUMBER_WORDS)),
    )
}

#: The rules of ``SyntheticSAE.for_model(..., rules=None)``: each fires hundreds of times in
#: 200k tokens of WordNet glosses, on at least two common tokens of different activation.
DEFAULT_RULES = ("digits", "capitalized", "ing", "brackets", "birds", "colours", "pronouns", "articles")


def get_rule(rule: str | Rule) -> Rule:
    """A :class:`Rule` by name (a key of :data:`RULES` or ``entity:<FIND concept>``), or the rule itself."""
    if isinstance(rule, Rule):
        return rule
    _checks.instance("rules", rule, str, "names or Rule objects")
    if rule in RULES:
        return RULES[rule]
    if rule.startswith("entity:"):
        return entity_rule(rule[len("entity:") :])
    raise ValueError(f"rules: unknown rule {rule!r} (known: {', '.join(RULES)}, or entity:<FIND concept>)")


#: Reserved vocabulary entries that are no text (BERT's ``[unused12]``, chat markers).
_RESERVED = re.compile(r"^\s*(\[unused\d+\]|\[[A-Z]{3,}\]|<\|[^|]*\|>)$")


def _special_ids(tokenizer) -> set[int]:
    """Every special token (the corpus's, UNK, chat markers): no rule fires on them."""
    ids = special_token_ids(tokenizer) | {int(i) for i in getattr(tokenizer, "all_special_ids", []) or []}
    unk = getattr(tokenizer, "unk_token_id", None)
    return ids | ({unk} if isinstance(unk, int) else set())


def token_infos(tokenizer, n: int | None = None) -> list[TokenInfo | None]:
    """:class:`TokenInfo` of token ids ``0..n-1`` (``n`` defaults to the tokenizer's size);
    ``None`` for special tokens and ids the tokenizer does not know."""
    renderer = TokenRenderer(tokenizer)
    size = len(tokenizer)
    n = size if n is None else n
    special = _special_ids(tokenizer)
    pieces = [renderer.piece(i) if i < size and i not in special else None for i in range(n)]
    cased = sum(1 for p in pieces if p and any("A" <= c <= "Z" for c in p)) > 0.01 * max(
        1, sum(p is not None for p in pieces))
    return [
        None
        if p is None or _RESERVED.match(p)
        else TokenInfo(p, p.strip(), bool(p.strip()) and (p[:1].isspace() or p.strip()[:1].isupper()), cased)
        for p in pieces
    ]


class _Architecture(str):
    """``"synthetic"`` that can also be called, as sae_lens 6's ``cfg.architecture()`` is."""

    def __call__(self) -> str:
        return str(self)


@dataclass
class SyntheticSAEMetadata:
    """The part of sae_lens's ``cfg.metadata`` the pipeline reads."""

    model_name: str
    hook_name: str = HOOK_NAME
    hook_head_index: int | None = None
    prepend_bos: bool = True
    context_size: int | None = None


@dataclass
class SyntheticSAEConfig:
    """sae_lens-style ``cfg``: widths, dtype, device, ``architecture`` (``"synthetic"``, also
    callable) and ``metadata`` (``hook_name`` ``hook_embed``, ``model_name``)."""

    d_in: int
    d_sae: int
    metadata: SyntheticSAEMetadata
    dtype: str = "float32"
    device: str = "cpu"
    architecture: str = field(default_factory=lambda: _Architecture("synthetic"))

    def to_dict(self) -> dict[str, Any]:
        return {
            "d_in": self.d_in,
            "d_sae": self.d_sae,
            "dtype": self.dtype,
            "device": self.device,
            "architecture": str(self.architecture),
            "metadata": vars(self.metadata).copy(),
        }


def _row_keys(rows: torch.Tensor, coef: torch.Tensor) -> torch.Tensor:
    """int64 hash of each float32 row's bit pattern (wrapping arithmetic, order-independent;
    ``+ 0.0`` turns -0.0 into 0.0, which compare equal)."""
    return (((rows.float() + 0.0).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF)
            * coef.to(rows.device)).sum(dim=-1)


class SyntheticSAE(torch.nn.Module):
    """Planted-feature SAE on ``hook_embed`` with the sae_lens surface, built by :meth:`for_model`;
    ``rules``, ``explanations`` (the true one per latent) and ``activation_table`` ``[vocab, d_sae]``."""

    def __init__(
        self,
        embeddings: torch.Tensor,
        activation_table: torch.Tensor,
        rules: Sequence[Rule],
        *,
        model_name: str = "model",
        seed: int = 0,
    ):
        super().__init__()
        embeddings = embeddings.detach().float().cpu()
        vocab, d_in = embeddings.shape
        if activation_table.shape != (vocab, len(rules)):
            raise ValueError(f"activation_table must be [{vocab}, {len(rules)}], got {tuple(activation_table.shape)}")
        self.name = "synthetic"
        self.rules = [r.name for r in rules]
        self.explanations = [r.explanation for r in rules]
        self.cfg = SyntheticSAEConfig(
            d_in=int(d_in), d_sae=len(rules), metadata=SyntheticSAEMetadata(model_name=model_name)
        )

        # identical rows cannot be told apart: each group answers with its smallest id
        uniq, inverse = torch.unique(embeddings, dim=0, return_inverse=True)
        canonical = torch.full((len(uniq),), vocab, dtype=torch.long).scatter_reduce(
            0, inverse, torch.arange(vocab), "amin"
        )
        table = activation_table.float().clone()
        self.n_duplicate_groups = int((torch.bincount(inverse) > 1).sum())
        self.canonical_id = canonical[inverse]  # [vocab]: the id encoding recovers for each token
        if len(uniq) < vocab:
            group_min = torch.full((len(uniq), table.shape[1]), float("inf")).scatter_reduce(
                0, inverse[:, None].expand_as(table), table, "amin"
            )
            # every member answers as its group's smallest id; a rule fires on a group only if it fires on every member
            table = table[canonical[inverse]] * (group_min > 0)[inverse]

        gen = torch.Generator().manual_seed(seed)
        for _ in range(8):
            coef = torch.randint(-(1 << 62), 1 << 62, (d_in,), generator=gen, dtype=torch.int64) | 1
            keys = _row_keys(uniq, coef)
            if len(torch.unique(keys)) == len(uniq):
                break
        else:  # pragma: no cover - 2^-64 per pair
            raise RuntimeError("could not hash the embedding rows without collisions")
        order = torch.argsort(keys)
        self.register_buffer("hash_coef", coef)
        self.register_buffer("sorted_keys", keys[order])
        self.register_buffer("sorted_ids", canonical[order])
        self.register_buffer("activation_table", table)
        # decoder: each latent's mean embedding over the tokens it fires on
        fires = (table > 0).float()
        self.W_dec = torch.nn.Parameter((fires.T @ embeddings) / fires.sum(0).clamp_min(1)[:, None],
                                        requires_grad=False)
        self.b_dec = torch.nn.Parameter(torch.zeros(d_in), requires_grad=False)

    @classmethod
    @torch.no_grad()
    def for_model(
        cls,
        model,
        tokenizer,
        rules: Sequence[str | Rule] | None = None,
        *,
        model_name: str | None = None,
        seed: int = 0,
    ) -> SyntheticSAE:
        """The planted-rule SAE for ``model``'s input embeddings and ``tokenizer``'s pieces.

        ``rules``: names (:data:`RULES`, ``entity:<FIND concept>``) or :class:`Rule` objects;
        ``None`` for :data:`DEFAULT_RULES` less those matching no token (a named one is a ValueError).
        """
        default = rules is None
        chosen = [get_rule(r) for r in (DEFAULT_RULES if default else rules)]
        if isinstance(rules, (str, Rule)) or not chosen:
            raise ValueError("rules must be a non-empty list of rule names or Rule objects")
        if len(set(names := [r.name for r in chosen])) != len(names):
            raise ValueError(f"rules must not repeat a rule, got {names}")
        embed = model.get_input_embeddings()
        vocab = int(embed.weight.shape[0])
        # the hook's own output for every id (covers embedding modules that scale their rows)
        rows = torch.cat([embed(torch.arange(s, min(s + 8192, vocab), device=embed.weight.device)).float().cpu()
                          for s in range(0, vocab, 8192)])
        infos = token_infos(tokenizer, vocab)
        kept, columns = [], []
        for rule in chosen:
            hits = [
                tid
                for tid, info in enumerate(infos)
                if info is not None and (info.cased or not rule.needs_case) and rule.fires(info)
            ]
            col = torch.zeros(vocab)
            # in token-id order, 1 + 0.5 * (rank mod 10) / 10: neighbouring levels differ, so the
            # importance-weighted sample has positions below the top windows
            col[hits] = 1.0 + 0.5 * (torch.arange(len(hits)) % 10).float() / 10
            if not hits:
                if default:
                    log.info("synthetic SAE: rule %r matches no token of this tokenizer; left out", rule.name)
                    continue
                raise ValueError(f"rules: {rule.name!r} matches no token of this tokenizer")
            kept.append(rule)
            columns.append(col)
        sae = cls(rows, torch.stack(columns, dim=1), kept, seed=seed, model_name=model_name or (
            str(getattr(model.config, "_name_or_path", "")).rstrip("/").split("/")[-1]
            or str(getattr(model.config, "model_type", "model"))
        ))
        if sae.n_duplicate_groups:
            log.info(
                "synthetic SAE: %d groups of identical embedding rows (each recovered as its smallest id)",
                sae.n_duplicate_groups,
            )
        return sae

    @property
    def device(self) -> torch.device:
        return self.sorted_keys.device

    @property
    def dtype(self) -> torch.dtype:
        return torch.float32

    @torch.no_grad()
    def token_ids(self, x: torch.Tensor) -> torch.Tensor:
        """The token id whose embedding row ``x [..., d_in]`` is (smallest of identical rows), ``-1`` for none."""
        if x.shape[-1] != self.cfg.d_in:
            raise ValueError(f"x must end in d_in={self.cfg.d_in}, got shape {tuple(x.shape)}")
        keys = _row_keys(x, self.hash_coef)
        sorted_keys = self.sorted_keys.to(keys.device)
        pos = torch.searchsorted(sorted_keys, keys).clamp_max(len(sorted_keys) - 1)
        return torch.where(sorted_keys[pos] == keys, self.sorted_ids.to(keys.device)[pos], torch.full_like(pos, -1))

    @torch.no_grad()
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """Activations ``[..., d_sae]`` (float32, on ``x``'s device)."""
        return self.encode_latents(x, None)

    @torch.no_grad()
    def encode_latents(self, x: torch.Tensor, idx: torch.Tensor | Sequence[int] | None) -> torch.Tensor:
        """Activations of latents ``idx`` only, ``[..., len(idx)]`` (all latents when ``None``)."""
        ids = self.token_ids(x)
        table = self.activation_table.to(x.device)
        if idx is not None:
            table = table[:, torch.as_tensor(idx, dtype=torch.long, device=x.device)]
        return table[ids.clamp_min(0)].masked_fill((ids < 0)[..., None], 0.0)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """``z @ W_dec + b_dec``: each active latent adds its tokens' mean embedding."""
        return z.to(self.W_dec.dtype) @ self.W_dec.to(z.device) + self.b_dec.to(z.device)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))

    def describe(self) -> list[dict[str, Any]]:
        """Per latent: rule name, explanation and how many vocabulary tokens it fires on."""
        return [
            {"latent": j, "rule": r, "explanation": e, "n_tokens": int(n)}
            for j, (r, e, n) in enumerate(
                zip(self.rules, self.explanations, (self.activation_table > 0).sum(0).tolist()))
        ]
