"""Publish findbench artefacts to the Hugging Face Hub.

    python push_to_hub.py --org my-org --datasets find neuron_test_sets \
        --metrics all --checkpoint ~/.cache/findbench/models/embedded-evaluator-v2 [--dry-run]

Everything is validated and staged before the first network call; ``--dry-run`` stops there
and prints what would be uploaded.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from findbench import hub
from findbench.resources import METRICS, metric_path


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    p.add_argument("--org", required=True, help="Hub user or organisation that receives the repos")
    p.add_argument("--datasets", nargs="*", default=[], help="dataset folders (e.g. find neuron_test_sets)")
    p.add_argument("--metrics", nargs="*", default=[], help="metric names, or 'all'")
    p.add_argument("--checkpoint", default=None, help="trained judge folder to publish as <org>/findbench-evaluator")
    p.add_argument("--checkpoint-name", default="findbench-evaluator")
    p.add_argument("--private", action="store_true")
    p.add_argument("--dry-run", action="store_true", help="validate and stage only")
    return p


def main(argv=None) -> int:
    args = make_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO)
    metrics = list(METRICS) if args.metrics == ["all"] else args.metrics
    uploads = [hub.plan_dataset(d, f"{args.org}/{Path(d).name}") for d in args.datasets]
    uploads += [hub.plan_metric(Path(metric_path(m)).parent, f"{args.org}/{m}") for m in metrics]
    if args.checkpoint:
        uploads.append(hub.plan_checkpoint(args.checkpoint, f"{args.org}/{args.checkpoint_name}"))
    if not uploads:
        print("nothing to publish (give --datasets, --metrics or --checkpoint)", file=sys.stderr)
        return 2
    for up in uploads:
        print(f"{up.repo_type:8s} {up.repo_id}: {len(up.files)} files staged at {up.folder}")
    if args.dry_run:
        return 0
    for url in hub.publish(uploads, private=args.private):
        print(url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
