"""FIND's synthetic entity neurons (FIND §2.3): 140 atomic concepts + 60 OR compositions.

An atomic neuron fires on words related to one concept ("chess"); a composition on words of
either of two (max of the two activations). Rows ``neurons_entities/fNNNNN``: the 140 atomic
concepts in FIND's order, then 60 seeded pairs. Per function: 10 unit-test words
(:func:`~findbench.find.synthetic_neurons.entity_words.split_words`; five per concept for a
composition), 10 exemplars (2 held-out own words, 8 of other concepts) and 10 probe inputs
(5 held-out own, 5 other).

``unit_tests_near`` keeps the unit-test words as the correct options and draws the wrong ones
from the pool FIND's distractors come from (other concepts' unit-test words), but only from the
nearest concepts (:func:`near_miss_words`): those on whose words the neuron itself fires most
(its mean activation over each other concept's unit-test words) without overlapping its own
(it selects fewer than half of their words: "air transport" is no near miss of "transport"),
and of their words only those it does not select (activation below :data:`SELECT_THRESHOLD`).
"""

from __future__ import annotations

import itertools
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from findbench import _checks, schema
from findbench.find.synthetic_neurons.backbones import (
    DEFAULT_LM,
    EntityNeuron,
    encode_features,
    fit_entity_probes,
    word_lists,
)
from findbench.find.synthetic_neurons.entity_words import ENTITY_CONCEPTS, probe_words, split_list, split_words
from findbench.find.synthetic_neurons.features import DEFAULT_ENTITY_FEATURES, load_features
from findbench.find.synthetic_neurons.prompts import ENTITY_ANSWER_PREFIX, ENTITY_CANDIDATES, render_prompt
from findbench.find.unit_tests import build_unit_tests, near_miss_tests

log = logging.getLogger(__name__)

CATEGORY = "neurons_entities"
N_COMPOSITIONS = 60
N_UNIT = 10
N_EXEMPLARS_OWN, N_EXEMPLARS = 2, 10
N_PROBES_OWN, N_PROBES = 5, 10
#: A neuron selects a word when its activation on it is at least this.
SELECT_THRESHOLD = 0.5
#: Near-miss distractors come from at least this many nearest concepts (more while these have
#: fewer unselected words than the tests need).
N_NEAR_CONCEPTS = 3
#: A concept of whose words a neuron selects at least this share overlaps the neuron's own
#: (a part or a synonym of it) and lends no near misses.
OVERLAP_SHARE = 0.5


def entity_splits(
    seed: int = 0, *, words: Mapping[str, Sequence[str]] | None = None
) -> dict[str, tuple[list[str], list[str]]]:
    """``{concept: (unit_words, held_out)}`` in concept order.

    With ``words=None`` the packaged lists and :func:`~findbench.find.synthetic_neurons.entity_words.split_words`
    are used; a custom ``{concept: words}`` mapping is split the same way (seeded shuffle).
    """
    if words is None:
        return {c: split_words(c, n_unit=N_UNIT, seed=seed) for c in ENTITY_CONCEPTS}
    words = word_lists("words", words, N_UNIT + N_PROBES_OWN + N_EXEMPLARS_OWN)
    return {c: split_list(list(ws), c, N_UNIT, seed) for c, ws in words.items()}


def composition_pairs(concepts: Sequence[str], n: int = N_COMPOSITIONS, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` distinct unordered pairs of distinct concepts, drawn by ``random.Random(seed)``;
    each pair keeps the concepts' order in ``concepts``."""
    k = len(concepts)
    if n < 0 or n > k * (k - 1) // 2:
        raise ValueError(f"n must be between 0 and {k * (k - 1) // 2} for {k} concepts, got {n}")
    rng = random.Random(f"compositions:{seed}")
    pairs: dict[tuple[int, int], tuple[str, str]] = {}  # by concept indices, in the order drawn
    while len(pairs) < n:
        a, b = sorted(rng.sample(range(k), 2))
        pairs.setdefault((a, b), (concepts[a], concepts[b]))
    return list(pairs.values())


def describe_entity(concepts: Sequence[str]) -> str:
    """Ground-truth description, e.g. 'The neuron fires on words related to chess.'"""
    return f"The neuron fires on words related to {' or to '.join(concepts[:2])}."


def near_miss_words(neuron: EntityNeuron, member: Mapping[str, Sequence[str]], n_words: int = 2 * N_UNIT) -> list[str]:
    """Words of the concepts nearest to ``neuron`` that it does not select, nearest concept first.

    ``member`` maps every concept to its words. The nearest concepts are those (not the neuron's
    own, nor overlapping it: it selects less than :data:`OVERLAP_SHARE` of their words) with the
    highest mean activation of ``neuron`` over their words; the first :data:`N_NEAR_CONCEPTS` of
    them and then more, until ``n_words`` words are found, lend their words with activation
    below :data:`SELECT_THRESHOLD`."""
    words = [w for ws in member.values() for w in ws]
    act = dict(zip(words, neuron.scores(words)))
    others = [
        c
        for c in member
        if c not in neuron.concepts and np.mean([act[w] >= SELECT_THRESHOLD for w in member[c]]) < OVERLAP_SHARE
    ]
    nearest = sorted(others, key=lambda c: -float(np.mean([act[w] for w in member[c]])))  # stable: ties keep order
    out: list[str] = []
    for k, c in enumerate(nearest):
        if k >= N_NEAR_CONCEPTS and len(out) >= n_words:
            break
        out += [w for w in member[c] if act[w] < SELECT_THRESHOLD]
    return out


def _interleave(*lists: Sequence[str]) -> list[str]:
    """The lists' words taken in turn (as far as the shortest goes); one list: itself."""
    return [w for group in zip(*lists) for w in group]


def entity_probes(
    seed: int = 0,
    *,
    words: Mapping[str, Sequence[str]] | None = None,
    encoder: str = DEFAULT_ENTITY_FEATURES,
    progress: bool = True,
) -> tuple[dict, dict[str, Any]]:
    """The entity neurons' probes of ``seed`` (fitted on the concepts' unit-test words and, with the
    packaged lists, their associations) and the fit's summary: :func:`fit_entity_probes`, cached."""
    splits = entity_splits(seed, words=words)
    training = probe_words({c: u for c, (u, _h) in splits.items()}, associations=words is None)
    return fit_entity_probes(training, encoder=encoder, seed=seed, progress=progress)


def generate_entities(
    seed: int = 0,
    *,
    words: Mapping[str, Sequence[str]] | None = None,
    n_compositions: int = N_COMPOSITIONS,
    encoder: str = DEFAULT_ENTITY_FEATURES,
    lm_model: str = DEFAULT_LM,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """The ``neurons_entities`` rows (deterministic per ``seed``): atomic concepts, then compositions.

    ``words`` replaces the packaged lists (tests); ``n_compositions`` is FIND's 60; ``encoder`` is
    the feature spec the ``embedding`` probes read; ``lm_model`` is recorded for the ``lm`` backbone;
    ``progress`` shows the probe fit's progress bars.
    """
    _checks.integer("seed", seed)
    splits = entity_splits(seed, words=words)
    concepts = list(splits)
    probes, fit_info = entity_probes(seed, words=words, encoder=encoder, progress=progress)
    specs: list[tuple[str, ...]] = [(c,) for c in concepts] + list(composition_pairs(concepts, n_compositions, seed))
    rng = random.Random(f"entities:{seed}")
    held_all = {c: h for c, (_u, h) in splits.items()}

    correct_items: list[list[str]] = []
    rows = []
    for index, spec in enumerate(specs):
        # a composition: half the unit words of each concept, in turn
        unit = _interleave(*(splits[c][0][: N_UNIT // len(spec)] for c in spec))
        own_held = _interleave(*(held_all[c] for c in spec))
        others = [w for c in concepts if c not in spec for w in held_all[c]]
        own_pick = rng.sample(own_held, N_EXEMPLARS_OWN + N_PROBES_OWN)
        other_pick = rng.sample(others, (N_EXEMPLARS - N_EXEMPLARS_OWN) + (N_PROBES - N_PROBES_OWN))
        exemplars = own_pick[:N_EXEMPLARS_OWN] + other_pick[: N_EXEMPLARS - N_EXEMPLARS_OWN]
        probes_in = own_pick[N_EXEMPLARS_OWN:] + other_pick[N_EXEMPLARS - N_EXEMPLARS_OWN :]
        rng.shuffle(exemplars)
        rng.shuffle(probes_in)
        correct_items.append(unit)
        c1, c2 = spec[0], (spec[1] if len(spec) == 2 else None)
        params = {
            "concepts": list(spec),
            "unit_words": unit,
            "seed": seed,
            "backbones": {
                "embedding": {
                    "encoder": encoder,
                    "probes": [probes[c].to_dict() for c in spec],
                    "fit": fit_info,
                    "composition": "max",
                },
                "lm": {
                    "model": lm_model,
                    "candidates": list(ENTITY_CANDIDATES),
                    "assistant_prefix": ENTITY_ANSWER_PREFIX,
                    "activation": "p1/(p0+p1)",
                },
            },
        }
        rows.append(
            schema.empty_row(
                function_id=schema.function_id(CATEGORY, index),
                category=CATEGORY,
                subcategory="atomic" if c2 is None else "composition",
                name=c1 if c2 is None else f"{c1} OR {c2}",
                params=schema.dumps(params),
                code="",
                description=describe_entity(spec),
                source="procedural",
                concept1=c1,
                concept2=c2,
                exception=None,
                backbone="embedding",
                prompt=render_prompt(CATEGORY, c1, c2),
                test_inputs=probes_in,
                exemplars=exemplars,
            )
        )
    word_owner = {w: c for c, (u, h) in splits.items() for w in (*u, *h)}
    tests = build_unit_tests(
        correct_items,
        seed=seed,
        is_correct=lambda i, item: word_owner.get(item) in specs[i],
    )
    for row, t in zip(rows, tests):
        row["unit_tests"] = t
    # near misses draw from a stream per function of their own: the draws above stay as they were
    unit_words = {c: u for c, (u, _h) in splits.items()}
    # a word's features differ in the last bits with the batch it was encoded in: encode the words
    # afresh in one call, so the batches (and the activations below) never depend on what this
    # process encoded before (the probe fit, or nothing when the fit came from the cache)
    load_features(encoder).clear_cache()
    encode_features(encoder, [w for ws in unit_words.values() for w in ws], progress=progress,
                    desc="entity unit-word features")
    for index, (spec, row, unit) in enumerate(tqdm(list(zip(specs, rows, correct_items)), desc="entity near misses",
                                                   unit="function", disable=not progress, leave=False)):
        pool = near_miss_words(EntityNeuron(spec, probes=probes, encoder=encoder), unit_words)
        if len(pool) < 2:
            raise ValueError(
                f"words: the concepts other than {spec} have fewer than two words the neuron does not select"
            )
        rng = random.Random(f"entities-near:{seed}:{index}")
        rng.shuffle(pool)
        words = itertools.cycle(pool)  # round again only when too few concepts lend words (tiny word lists)
        row["unit_tests_near"] = near_miss_tests(unit, lambda _word, words=words: words, rng=rng).tests
    log.info("generated %d entity neurons (%d compositions)", len(rows), n_compositions)
    return rows
