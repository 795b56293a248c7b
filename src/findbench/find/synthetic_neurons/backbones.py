"""Backbones that make FIND's synthetic neurons compute: ``embedding``, ``table`` and ``lm``.

Entity neurons (score in [0, 1]):

- ``embedding`` (default): per concept one ``sigmoid(w · e(x) + b)`` over word features
  (:mod:`~findbench.find.synthetic_neurons.features`), stored in the row's ``params``: a
  logistic probe on the concept's unit-test words and training associations against other
  concepts' words, standardised against its background and Platt-calibrated for a positive
  prior of 1/3, other concepts' words averaging 0.08 (:func:`fit_entity_probes`). Held-out
  words are never fitted. A composition (OR) scores the max over its concepts.
- ``lm``: FIND's prompt on any LM; activation ``p("1") / (p("0") + p("1"))``.

Relation neurons (answer string):

- ``table`` (default): the knowledge table's canonical output, or ``"undefined"`` outside the
  table or inside the exception subdomain.
- ``lm``: FIND's prompt on any LM, greedy generation.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from findbench import _checks, schema
from findbench._io import atomic_write_json, cache_dir, cache_lock
from findbench.find.synthetic_neurons.features import DEFAULT_ENTITY_FEATURES, load_features
from findbench.find.synthetic_neurons.prompts import (
    ENTITY_ANSWER_PREFIX,
    ENTITY_CANDIDATES,
    UNDEFINED,
    fill_prompt,
    parse_relation_answer,
    render_prompt,
)
from findbench.lm import load_lm
from findbench.lm.encoder import EMBEDDED_ENCODER

log = logging.getLogger(__name__)

ENTITY_BACKENDS = ("embedding", "lm")
RELATION_BACKENDS = ("table", "lm")
DEFAULT_BACKENDS = {"neurons_entities": "embedding", "neurons_relations": "table"}
#: LM used by the ``lm`` backbone when none is given.
DEFAULT_LM = "embedded"
#: Bumped when the probe fit changes, so cached fits are recomputed.
_PROBE_VERSION = 4


@dataclass(frozen=True)
class EntityProbe:
    """Calibrated read-out of one concept: ``score(x) = sigmoid(weights · e(x) + bias)``."""

    concept: str
    weights: tuple[float, ...]
    bias: float

    def to_dict(self) -> dict[str, Any]:
        return {"concept": self.concept, "weights": list(self.weights), "bias": self.bias}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> EntityProbe:
        try:
            return cls(str(d["concept"]), tuple(float(w) for w in d["weights"]), float(d["bias"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"probe: needs concept, weights and bias ({exc})") from None


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))


_FIT_MEMO: dict[str, tuple[dict[str, EntityProbe], dict]] = {}


def word_lists(name: str, words: Any, at_least: int) -> Mapping[str, Sequence[str]]:
    """``words`` when it maps at least two concepts to lists of at least ``at_least`` words each;
    else ValueError naming ``name``."""
    if not isinstance(words, Mapping) or len(words) < 2:
        raise ValueError(f"{name} must map at least two concepts to their words")
    for c, ws in words.items():
        if isinstance(ws, str) or len(ws) < at_least:
            raise ValueError(f"{name}[{c!r}] must list at least {at_least} words")
    return words


def fit_entity_probes(
    unit_words: Mapping[str, Sequence[str]],
    *,
    encoder: str = DEFAULT_ENTITY_FEATURES,
    C: float = 1.0,
    n_folds: int = 5,
    positive_prior: float = 1 / 3,
    background_rate: float | None = 0.08,
    seed: int = 0,
    decimals: int = 5,
    use_cache: bool = True,
    progress: bool = True,
) -> tuple[dict[str, EntityProbe], dict[str, Any]]:
    """Fit one calibrated probe per concept from its unit-test words (see module doc).

    Args:
        unit_words: ``{concept: words}``, at least ``n_folds`` words each, at least two concepts.
        encoder: a feature spec (:mod:`~findbench.find.synthetic_neurons.features`).
        C: inverse L2 strength of the per-concept logistic probes.
        positive_prior: prior of the positive class the Platt calibration assumes.
        background_rate: cross-fitted mean activation on other concepts' words the intercept is set
            to (FIND's Vicuna backbone: 0.079); None keeps Platt's intercept.
        decimals: rounding of stored weights (keeps rebuilt rows byte-identical).
        use_cache: reuse a fit stored under the findbench cache (keyed by all arguments but
            ``progress``); a process that finds another fitting the same entry waits for it
            under a file lock (and says so), then reads its fit.
        progress: progress bars (with an ETA) over the word features and the fits.

    Returns:
        ``(probes, info)``: ``probes[concept]`` and a JSON-able summary of the fit.
    """
    word_lists("unit_words", unit_words, n_folds)
    if not 0.0 < positive_prior < 1.0:
        raise ValueError(f"positive_prior must be in (0, 1), got {positive_prior}")
    if background_rate is not None and not 0.0 < background_rate < 1.0:
        raise ValueError(f"background_rate must be in (0, 1) or None, got {background_rate}")
    _checks.integer("n_folds", n_folds, 2)
    config = {"version": _PROBE_VERSION, "encoder": encoder, "C": C, "n_folds": n_folds,
              "positive_prior": positive_prior, "background_rate": background_rate, "seed": seed, "decimals": decimals,
              "words": {c: list(ws) for c, ws in unit_words.items()}}
    key = hashlib.sha256(schema.dumps(config).encode()).hexdigest()[:24]
    if key in _FIT_MEMO:
        return _FIT_MEMO[key]
    if not use_cache:
        result = _fit_entity_probes(config, progress=progress)
    else:
        path = cache_dir("neuron_probes") / f"{key}.json"
        result = _read_fit(path)
        if result is None:
            with cache_lock(path, "fitting the entity probes"):
                result = _read_fit(path)  # another process may have fitted it while this one waited
                if result is None:
                    result = _fit_entity_probes(config, progress=progress)
                    atomic_write_json(path, {"probes": {c: p.to_dict() for c, p in result[0].items()},
                                             "info": result[1]})
    _FIT_MEMO[key] = result
    return result


def _read_fit(path) -> tuple[dict[str, EntityProbe], dict[str, Any]] | None:
    """The fit cached at ``path`` (written whole: :func:`~findbench._io.atomic_write_json`), or None."""
    if not path.is_file():
        return None
    payload = json.loads(path.read_text())
    return {c: EntityProbe.from_dict(p) for c, p in payload["probes"].items()}, payload["info"]


def _ovr_logistic(X: np.ndarray, labels: np.ndarray, n: int, C: float) -> tuple[np.ndarray, np.ndarray]:
    """One-vs-rest L2 logistic regressions for all ``n`` classes at once, with balanced class
    weights: the objective of ``sklearn.linear_model.LogisticRegression(C=C,
    class_weight="balanced")`` per class (unpenalised intercept), solved jointly by L-BFGS in
    torch — the per-class problems are separable, so this is n independent fits in one."""
    import torch

    Xt = torch.as_tensor(X, dtype=torch.float64)
    Y = torch.as_tensor(labels[:, None] == np.arange(n)[None, :], dtype=torch.float64)
    n_pos = Y.sum(0)
    n_all = float(len(X))
    sample_w = torch.where(Y > 0, n_all / (2 * n_pos), n_all / (2 * (n_all - n_pos)))
    W = torch.zeros(n, X.shape[1], dtype=torch.float64, requires_grad=True)
    b = torch.zeros(n, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([W, b], lr=1.0, max_iter=500, tolerance_grad=1e-4, tolerance_change=1e-9,
                            history_size=20, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        z = Xt @ W.T + b
        loss = C * (sample_w * torch.nn.functional.binary_cross_entropy_with_logits(z, Y, reduction="none")).sum()
        loss = loss + 0.5 * (W * W).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return W.detach().numpy(), b.detach().numpy()


def _intercept_for_rate(scores: np.ndarray, rate: float) -> float:
    """The intercept ``b`` with ``mean(sigmoid(scores + b)) == rate`` (bisection: the mean is
    increasing in ``b``)."""
    lo, hi = -50.0, 50.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if float(_sigmoid(scores + mid).mean()) > rate else (mid, hi)
    return 0.5 * (lo + hi)


def encode_features(spec: str, words: list[str], *, progress: bool, desc: str = "entity probe features") -> np.ndarray:
    """The features ``spec`` of ``words`` under a progress bar ``desc`` with an ETA. The distinct words go
    in the encoders' own order (length, then text) and in chunks of whole batches of every part,
    so the batches, and thus the floats, are those of a single ``encode(words)`` call."""
    from tqdm.auto import tqdm

    feats = load_features(spec)
    todo = sorted(set(words), key=lambda t: (len(t), t))
    step = math.lcm(*(int(getattr(p, "batch_size", 1)) for p in getattr(feats, "parts", [feats])))
    with tqdm(total=len(todo), desc=desc, unit="word", disable=not progress, leave=False) as bar:
        for start in range(0, len(todo), step):
            feats.encode(todo[start : start + step])
            bar.update(len(todo[start : start + step]))
    return feats.encode(words)


def _fit_entity_probes(config: Mapping[str, Any], *, progress: bool = True
                       ) -> tuple[dict[str, EntityProbe], dict[str, Any]]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.model_selection import StratifiedKFold
    from tqdm.auto import tqdm

    concepts = list(config["words"])
    words = [w for c in concepts for w in config["words"][c]]
    labels = np.array([i for i, c in enumerate(concepts) for _ in config["words"][c]])
    X = encode_features(config["encoder"], words, progress=progress).astype(np.float64)
    n = len(concepts)
    folds = list(StratifiedKFold(config["n_folds"], shuffle=True, random_state=config["seed"]).split(X, labels))

    cross = np.zeros((len(X), n))
    with tqdm(total=len(folds) + 1, desc="fitting entity probes", unit="fit", disable=not progress, leave=False) as bar:
        for tr, te in folds:  # cross-fitted scores for the calibration, then the fit on every word
            w, b = _ovr_logistic(X[tr], labels[tr], n, config["C"])
            cross[te] = X[te] @ w.T + b
            bar.update()
        full_w, full_b = _ovr_logistic(X, labels, n, config["C"])
        bar.update()
    positive = labels[:, None] == np.arange(n)[None, :]
    mu = np.array([cross[~positive[:, j], j].mean() for j in range(n)])
    sd = np.array([cross[~positive[:, j], j].std() for j in range(n)]) + 1e-12
    z = (cross - mu) / sd
    prior = config["positive_prior"]
    n_pos, n_neg = positive.sum(), (~positive).sum()
    weight_pos = prior / (1 - prior) * n_neg / n_pos
    platt = LogisticRegression(C=1e6, class_weight={True: weight_pos, False: 1.0}, max_iter=1000)
    platt.fit(z.reshape(-1, 1), positive.reshape(-1))
    a, b = float(platt.coef_[0][0]), float(platt.intercept_[0])
    rate = config.get("background_rate")
    if rate is not None:  # shift the intercept so other concepts' words average `rate` (cross-fitted)
        b = _intercept_for_rate(a * z[~positive], rate)
    d = config["decimals"]
    probes = {  # the calibrated read-out: weights a * w / sd, bias a * (b_j - mu) / sd + b
        c: EntityProbe(c, tuple(round(float(v), d) for v in a * full_w[j] / sd[j]),
                       round(float(a * (full_b[j] - mu[j]) / sd[j] + b), d))
        for j, c in enumerate(concepts)
    }
    cv_auc = float(np.mean([roc_auc_score(positive[:, j], cross[:, j]) for j in range(n)]))
    info = {
        "method": "logistic probe on word features + Platt calibration of cross-fitted, background-standardised scores",
        "encoder": config["encoder"],
        "C": config["C"],
        "n_folds": config["n_folds"],
        "seed": config["seed"],
        "positive_prior": round(prior, 6),
        "background_rate": rate,
        "platt_slope": round(a, 6),
        "platt_intercept": round(b, 6),
        "cross_fitted_auc": round(cv_auc, 6),
    }
    log.info("fitted %d entity probes (cross-fitted AUC %.3f)", n, cv_auc)
    return probes, info


def _as_batch(x: Any, name: str = "x") -> tuple[list[str], bool]:
    """(inputs, was_single) for a str or a sequence of str; TypeError naming the bad one."""
    if isinstance(x, str):
        return [x], True
    _checks.instance(name, x, (list, tuple), "a str or a list of str")
    return [_checks.instance(f"{name}[{i}]", t, str, "a str") for i, t in enumerate(x)], False


_load_lm_cached = functools.lru_cache(maxsize=4)(load_lm)


def _resolve_lm(lm: Any):
    if lm is None or isinstance(lm, str):
        return _load_lm_cached(DEFAULT_LM if lm is None else lm)
    if not (hasattr(lm, "generate") and hasattr(lm, "candidate_logprobs")):
        raise TypeError(f"lm must be an LM (generate, candidate_logprobs) or a model spec, got {type(lm).__name__}")
    return lm


class EntityNeuron:
    """A synthetic entity neuron: ``neuron(word) -> float`` or ``neuron([words]) -> [floats]``.

    Args:
        concepts: one concept, or two for an OR composition.
        backend: ``"embedding"`` or ``"lm"``.
        probes: ``{concept: EntityProbe}`` (embedding backend).
        encoder: feature spec the probes read (embedding backend).
        lm: an LM or a model spec (lm backend).
        prompt: FIND prompt with the input placeholder (lm backend; rendered when None).
    """

    def __init__(
        self,
        concepts: Sequence[str],
        backend: str = "embedding",
        *,
        probes: Mapping[str, EntityProbe] | None = None,
        encoder: str = DEFAULT_ENTITY_FEATURES,
        lm: Any = None,
        prompt: str | None = None,
    ):
        if isinstance(concepts, str) or not 1 <= len(concepts) <= 2:
            raise ValueError(f"concepts must list one or two concepts, got {concepts!r}")
        _checks.one_of("backend", backend, ENTITY_BACKENDS)
        self.concepts = tuple(concepts)
        self.backend = backend
        if backend == "embedding":
            if probes is None or any(c not in probes for c in self.concepts):
                raise ValueError(f"probes: need a probe for each of {self.concepts}")
            self._W = np.array([probes[c].weights for c in self.concepts], dtype=np.float64)
            self._b = np.array([probes[c].bias for c in self.concepts], dtype=np.float64)
            self.encoder = encoder
        else:
            self._lm = _resolve_lm(lm)
            self.prompt = prompt or render_prompt("neurons_entities", *self.concepts)

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """Activations in [0, 1] for a batch of inputs (one forward pass / one LM batch)."""
        texts, _ = _as_batch(list(texts) if not isinstance(texts, str) else texts, "inputs")
        if not texts:
            return np.zeros(0)
        if self.backend == "embedding":
            emb = load_features(self.encoder).encode(texts).astype(np.float64)
            return _sigmoid(emb @ self._W.T + self._b).max(axis=1)
        convs = [[{"role": "user", "content": fill_prompt(self.prompt, t)}] for t in texts]
        lp = np.array(
            self._lm.candidate_logprobs(convs, list(ENTITY_CANDIDATES), assistant_prefix=ENTITY_ANSWER_PREFIX),
            dtype=np.float64)
        return _sigmoid(lp[:, 0] - lp[:, 1])  # p1 / (p0 + p1)

    def __call__(self, x: str | Sequence[str]) -> float | list[float]:
        texts, single = _as_batch(x)
        out = [float(v) for v in self.scores(texts)]
        return out[0] if single else out


def table_answer(table, exception_index: int | None, text: str) -> str:
    """The ``table`` backbone's answer: the entry's output, or "undefined" outside the
    table or inside exception ``exception_index`` (0, 1 or None)."""
    return expected_answer(table, exception_index, table.lookup(text))


def expected_answer(table, exception_index: int | None, entry) -> str:
    """The correct answer for a table entry (or None): its output, or "undefined" inside the exception."""
    if entry is None or (exception_index is not None and table.exceptions[exception_index].matches(entry)):
        return UNDEFINED
    return entry.output


class RelationNeuron:
    """A synthetic relation neuron: ``neuron(text) -> answer`` or ``neuron([texts]) -> [answers]``.

    Args:
        table: the :class:`~findbench.find.synthetic_neurons.relation_tables.RelationTable`.
        exception_index: None (atomic) or 0 / 1 (corrupted by that exception).
        backend: ``"table"`` or ``"lm"``.
        lm: an LM or a model spec (lm backend).
        prompt: FIND prompt with the input placeholder (lm backend; rendered when None).
        max_new_tokens: generation budget of the lm backend.

    The table backend answers "undefined" for inputs its table lacks, as FIND does.
    """

    def __init__(
        self,
        table,
        exception_index: int | None = None,
        backend: str = "table",
        *,
        lm: Any = None,
        prompt: str | None = None,
        max_new_tokens: int = 24,
    ):
        _checks.one_of("backend", backend, RELATION_BACKENDS)
        if exception_index not in (None, 0, 1) or isinstance(exception_index, bool):
            raise ValueError(f"exception_index must be None, 0 or 1, got {exception_index!r}")
        self.table = table
        self.exception_index = exception_index
        self.backend = backend
        self.exception = None if exception_index is None else table.exceptions[exception_index].text
        if backend == "lm":
            self._lm = _resolve_lm(lm)
            self.prompt = prompt or render_prompt("neurons_relations", table.concept1, table.concept2, self.exception)
            self.max_new_tokens = max_new_tokens

    def answers(self, texts: Sequence[str]) -> list[str]:
        """Answers for a batch of inputs."""
        texts, _ = _as_batch(list(texts) if not isinstance(texts, str) else texts, "inputs")
        if self.backend == "table":
            return [table_answer(self.table, self.exception_index, t) for t in texts]
        if not texts:
            return []
        convs = [[{"role": "user", "content": fill_prompt(self.prompt, t)}] for t in texts]
        outs = self._lm.generate(convs, max_new_tokens=self.max_new_tokens, temperature=0.0)
        return [parse_relation_answer(o) for o in outs]

    def __call__(self, x: str | Sequence[str]) -> str | list[str]:
        texts, single = _as_batch(x)
        out = self.answers(texts)
        return out[0] if single else out


def row_params(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row's ``params`` as a dict (JSON text or a mapping; none: ``{}``); ValueError otherwise."""
    raw = row.get("params")
    if raw in (None, ""):
        return {}
    try:
        params = json.loads(raw) if isinstance(raw, str) else dict(raw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"row['params'] is not JSON text: {exc}") from None
    if not isinstance(params, dict):
        raise ValueError("row['params'] must be a JSON object")
    return params


def relation_for_row(row: Mapping[str, Any], params: Mapping[str, Any], tables=None):
    """(table, exception_index) of a relation row: from params, else by matching the concept
    and exception texts of a find-v1 row against the tables."""
    from findbench.find.synthetic_neurons.relation_tables import load_relation_tables, normalize_text

    tables = list(tables) if tables is not None else load_relation_tables()
    if "relation" in params:
        match = [t for t in tables if t.key == params["relation"]]
        if not match:
            raise ValueError(f"params.relation: unknown relation {params['relation']!r}")
        idx = params.get("exception_index")
        if idx not in (None, 0, 1):
            raise ValueError(f"params.exception_index must be null, 0 or 1, got {idx!r}")
        return match[0], idx
    c1, c2 = row.get("concept1"), row.get("concept2")
    if not isinstance(c1, str) or not isinstance(c2, str):
        raise ValueError("row: a relation row needs params.relation or concept1 and concept2")
    match = [
        t
        for t in tables
        if normalize_text(t.concept1) == normalize_text(c1) and normalize_text(t.concept2) == normalize_text(c2)
    ]
    if not match:
        raise ValueError(f"concept1/concept2: no relation table for {c1!r} -> {c2!r}")
    exc = row.get("exception")
    if not exc or not str(exc).strip():
        return match[0], None
    found = next(((t, k) for t in match for k, e in enumerate(t.exceptions)
                  if normalize_text(e.text) == normalize_text(str(exc))), None)
    if found is None:
        raise ValueError(f"exception: {exc!r} is not an exception of relation {match[0].key!r}")
    return found


def make_function(row: Mapping[str, Any], backend: str | None = None, lm: Any = None, *, tables=None) -> Callable:
    """The callable of a ``neurons_entities`` / ``neurons_relations`` row.

    Args:
        row: a dataset row (``category``, ``params``, ``concept1`` ... as in :mod:`findbench.schema`).
        backend: ``"embedding"`` / ``"lm"`` (entities), ``"table"`` / ``"lm"`` (relations);
            default: the row's ``backbone``.
        lm: LM instance or model spec for the ``lm`` backend (default: the row's, else ``"embedded"``).
        tables: relation tables to use instead of the packaged ones.

    Returns:
        :class:`EntityNeuron` (word(s) -> score(s) in [0, 1]) or :class:`RelationNeuron`
        (input(s) -> answer(s)); both accept a single input or a list (one batch).
    """
    _checks.instance("row", row, Mapping, "a mapping")
    category = _checks.one_of("row['category']", row.get("category"), sorted(DEFAULT_BACKENDS))
    params = row_params(row)
    backend = backend or row.get("backbone") or DEFAULT_BACKENDS[category]
    _checks.one_of("backend", backend, ENTITY_BACKENDS if category == "neurons_entities" else RELATION_BACKENDS)
    cfg = params.get("backbones", {}).get(backend, {})
    if backend == "lm" and lm is None:
        lm = cfg.get("model", DEFAULT_LM)
    if category == "neurons_entities":
        concepts = params.get("concepts") or [c for c in (row.get("concept1"), row.get("concept2")) if c]
        if not concepts:
            raise ValueError("row: an entity row needs params.concepts or concept1")
        if backend == "lm":
            return EntityNeuron(concepts, "lm", lm=lm, prompt=row.get("prompt") or None)
        encoder = cfg.get("encoder", EMBEDDED_ENCODER)  # rows that name no encoder predate the LM features
        if "probes" in cfg:
            probes = {p["concept"]: EntityProbe.from_dict(p) for p in cfg["probes"]}
        else:
            from findbench.find.synthetic_neurons.entity_words import default_probe_words

            probes = fit_entity_probes(default_probe_words(), encoder=encoder)[0]
            missing = [c for c in concepts if c not in probes]
            if missing:
                raise ValueError(f"concept1/concept2: no entity word list for {missing}")
        return EntityNeuron(concepts, "embedding", probes=probes, encoder=encoder)
    table, idx = relation_for_row(row, params, tables)
    return RelationNeuron(table, idx, backend, lm=lm, prompt=row.get("prompt") or None)  # lm, prompt: lm backend only
