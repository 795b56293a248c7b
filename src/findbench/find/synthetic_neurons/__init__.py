"""FIND's synthetic neurons: entity neurons (words -> activation in [0, 1]) and relation
neurons (input -> answer or "undefined"), on embedded backbones or any LM (FIND §2.3, app. G).

- :func:`generate_entities` / :func:`generate_relations`: the dataset rows.
- :func:`make_function`: a row -> a batched callable (backend ``embedding`` / ``table`` / ``lm``).
- :func:`render_prompt`: FIND's prompt text for the ``lm`` backbone.
- :func:`backbone_report`: FIND appendix G (selectivity, AUC, relation accuracy) for any backbone.
"""

from __future__ import annotations

from findbench.find.synthetic_neurons.backbones import (
    DEFAULT_BACKENDS,
    ENTITY_BACKENDS,
    RELATION_BACKENDS,
    EntityNeuron,
    EntityProbe,
    RelationNeuron,
    fit_entity_probes,
    make_function,
    table_answer,
)
from findbench.find.synthetic_neurons.entities import generate_entities
from findbench.find.synthetic_neurons.prompts import UNDEFINED, fill_prompt, parse_relation_answer, render_prompt
from findbench.find.synthetic_neurons.relations import generate_relations
from findbench.find.synthetic_neurons.report import backbone_report

__all__ = [
    "DEFAULT_BACKENDS",
    "ENTITY_BACKENDS",
    "RELATION_BACKENDS",
    "UNDEFINED",
    "EntityNeuron",
    "EntityProbe",
    "RelationNeuron",
    "backbone_report",
    "fill_prompt",
    "fit_entity_probes",
    "generate_entities",
    "generate_relations",
    "make_function",
    "parse_relation_answer",
    "render_prompt",
    "table_answer",
]
