"""The FIND benchmark builder: one config per function category, one ``test`` split."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

import datasets

from findbench import citations, schema
from findbench.builders.config import BuildConfig
from findbench.find import generate_rows
from findbench.resources import card_template

_DESCRIPTION = """\
FIND (Function INterpretation and Description): functions with ground-truth descriptions for
evaluating automated interpretability methods. numeric: 1000 real functions (atomic,
compositions, MLP approximations, noise, domain corruption); strings: 1000 string functions
(atomic and compositions); neurons_entities: 200 synthetic neurons scoring association with
one or two concepts; neurons_relations: 75 synthetic neurons mapping inputs to outputs by a
real-world relation, 50 of them corrupted on a subdomain.
"""


@dataclass
class FindConfig(datasets.BuilderConfig):
    """One FIND category (``name``) built with the settings of ``findbench build``: ``build``, the
    command's :class:`~findbench.builders.config.BuildConfig` (seed, source, data_dir)."""

    build: BuildConfig | None = None


class Find(datasets.GeneratorBasedBuilder):
    """FIND as a ``datasets`` builder."""

    BUILDER_CONFIG_CLASS = FindConfig
    BUILDER_CONFIGS = [FindConfig(name=c, description=f"FIND {c} functions") for c in schema.CONFIGS]
    DEFAULT_CONFIG_NAME = "numeric"

    def _info(self) -> datasets.DatasetInfo:
        return datasets.DatasetInfo(
            description=_DESCRIPTION,
            features=schema.features(self.config.name),
            homepage="https://github.com/multimodal-interpretability/FIND",
            license="mit",
            citation=citations.FIND,
        )

    def _split_generators(self, dl_manager):
        return [datasets.SplitGenerator(name=datasets.Split.TEST, gen_kwargs={})]

    def _generate_examples(self):
        cfg = self.config.build or BuildConfig()
        for row in generate_rows(self.config.name, seed=cfg.seed, source=cfg.source, data_dir=cfg.data_dir):
            schema.check_row(row)
            yield row["function_id"], row


def _card_body(entries, folder: str) -> str:

    provs = {name: entry["provenance"] for name, entry in entries.items()}
    rows = [f"| {name} | {entries[name]['dataset_info']['splits'][0]['num_examples']} | {prov.get('source')} | "
            f"{prov.get('seed', '') if prov.get('source') == 'procedural' else '—'} |"
            for name, prov in provs.items()]
    fields = [
        f"| `{col}` | "
        + (spec if isinstance(spec, str) else "list of " + (spec[0] if isinstance(spec[0], str) else "struct"))
        + f" | {doc}{' (rasp only)' if col in schema.RASP_COLUMNS else ''} |"
        for col, (spec, doc) in (schema.COLUMNS | schema.RASP_COLUMNS).items()
    ]
    procedural = "neurons_relations" in provs and provs["neurons_relations"].get("source", "procedural") == "procedural"
    return card_template("find.md").format(
        source_line="sources: " + ", ".join(sorted({p.get("source", "procedural") for p in provs.values()})),
        folder=folder,
        config_table="\n".join(rows),
        relation_data=_relation_data_section() if procedural else "",
        field_table="\n".join(fields),
        citation=citations.FIND.strip(),
    )


def _relation_data_section() -> str:
    """Card section naming the data behind ``neurons_relations``: package versions and licences
    and a sha256 fingerprint of each relation's table, so a package release that changes an
    answer is visible."""
    from findbench.find.synthetic_neurons.relation_tables import data_packages, relation_provenance

    prov = relation_provenance()
    licences = {d: p["licence"] for d, p in data_packages().items()}
    versions = {d: v for p in prov.values() for d, v in p["packages"].items()}
    return "\n".join([
        "## Relation data (neurons_relations)",
        "",
        "The relation neurons answer from knowledge tables built, when this folder was written, from "
        "these data packages (the other relations use findbench's hand-written tables):",
        "",
        *[f"- {d} {versions[d]}: {licences[d]}" for d in sorted(versions)],
        *sorted({f"- IANA time zone database {p['tz_database']} (public domain), read through zoneinfo"
                 for p in prov.values() if "tz_database" in p}),
        "",
        "`sha256` fingerprints each table's entries (inputs, answers, aliases, attributes); a package "
        "release that changes any answer changes it.",
        "",
        "| relation | source | entries | sampled | sha256 |",
        "|---|---|---|---|---|",
        *(f"| {key} | "
          + (", ".join(f"{d} {v}" for d, v in p["packages"].items()) if p["source"] == "package" else "hand-written")
          + f" | {p['n_entries']} | {p['n_core']} | `{p['fingerprint']}` |" for key, p in prov.items()),
    ]) + "\n"


CARD_HEADER = {
    "license": "mit",
    "pretty_name": "FIND: Function INterpretation and Description",
    "language": ["en"],
    "tags": ["interpretability", "explainability", "benchmark", "find"],
    "size_categories": ["1K<n<10K"],
}


def _default_configs(cfg: BuildConfig) -> list[str]:
    """Every config; ``rasp`` only where its compiled weights are at hand (shipped for seed 0, or
    compiled before): compiling a new seed takes tracr and minutes, so it is asked for by name."""
    from findbench.find.rasp.store import compiled

    if cfg.source != "procedural":
        return list(schema.CATEGORIES)
    if compiled(cfg.seed):
        return list(schema.CONFIGS)
    logging.getLogger(__name__).info("rasp: no compiled weights for seed %d; build it with --configs rasp", cfg.seed)
    return list(schema.CATEGORIES)


def build(cfg: BuildConfig, *, progress: bool = True):
    """Write the FIND dataset folder ``cfg.out`` (parquet per config + README card) with the settings
    ``cfg`` (``findbench build``'s flags). Configs already in ``out`` and not named in ``configs`` are
    kept, so ``--configs neurons_entities,neurons_relations`` adds those two to an existing build.
    """
    from pathlib import Path

    from findbench.builders.folder import build_dataset_folder

    if cfg.source == "find-v1" and cfg.data_dir:
        if not Path(cfg.data_dir).is_dir():
            raise FileNotFoundError(f"--data-dir: {Path(cfg.data_dir).resolve()} is not a folder")
        cfg = replace(cfg, data_dir=str(Path(cfg.data_dir).resolve()))
    names = cfg.configs or _default_configs(cfg)
    # the sidecar's provenance: what the rows depend on
    prov = {"seed": cfg.seed, "source": cfg.source} if cfg.source == "procedural" else \
        {"source": cfg.source, "data_dir": cfg.data_dir}
    return build_dataset_folder(
        cfg.out,
        Find,
        {c: {"build": cfg} for c in names},
        provenance=dict.fromkeys(names, prov),
        card_header=CARD_HEADER,
        card_body=lambda entries: _card_body(entries, Path(cfg.out).name),
        progress=progress,
    )
