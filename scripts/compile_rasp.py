"""Compile the ``rasp`` config's programs with tracr (needs ``pip install 'findbench[rasp]'``).

    python scripts/compile_rasp.py --seed 0 --jobs 2 [--cache DIR]

Each program is compiled once into the cache (``<key>.npz`` weights + ``<key>.json`` labels and
tracr's own outputs on a few inputs; ``<key>.failed`` when tracr refuses it). Then
``python scripts/compile_rasp.py --seed 0 --ship`` validates every compiled model against its
reference on the whole domain (or 1,000 sampled inputs) and writes the package's shipped weights.
"""

from __future__ import annotations

import argparse

from findbench.find.rasp import catalog, compile, store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0, help="catalog seed (default: 0)")
    parser.add_argument("--jobs", type=int, default=1, help="compile processes (default: 1)")
    parser.add_argument("--cache", default=None, help="compile cache folder (default: findbench's cache)")
    parser.add_argument("--limit", type=int, default=None, help="compile only the first N programs (default: all)")
    parser.add_argument("--ship", action="store_true", help="validate and write the shipped weights of --seed")
    args = parser.parse_args()
    cache = args.cache or str(store.compile_cache(args.seed))
    items, rejected = catalog.catalog(args.seed)
    print(f"{len(items)} programs; rejected before compiling: {rejected}")
    compile.compile_all(items[: args.limit], cache, jobs=args.jobs)
    if args.ship:
        report = store.ship(items, cache, args.seed)
        print(report)


if __name__ == "__main__":
    main()
