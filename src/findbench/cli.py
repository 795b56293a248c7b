"""The ``findbench`` command line. Each subcommand is a ``_add_<name>`` parser builder plus a
``_run_<name>`` function that calls the library; no algorithm lives here."""

from __future__ import annotations

import argparse
import logging
import sys


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="findbench", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, obj in sorted(globals().items()):
        if name.startswith("_add_") and callable(obj):
            obj(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        rc = args.func(args)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"findbench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
