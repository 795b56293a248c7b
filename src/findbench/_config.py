"""Settings written once: a config dataclass field per setting (its default, help and checks live
in the config beside its library function) and the argparse flags made from such a dataclass.

Standard library only, so ``findbench --help`` imports no model library: ``HfArgumentParser``
did the same job but ``import transformers`` alone took 0.6 s (1.5 s for ``--help``).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from typing import Any

#: A list of strings that the command line takes comma-separated (``--configs a,b``); the
#: config's ``__post_init__`` splits a string.
Csv = list[str] | str | None


def arg(default: Any, help: str, **kwargs: Any) -> Any:
    """A config field that is also a flag: its ``help`` and argparse settings in ``kwargs``
    (``choices``, ``aliases``, ``metavar``, ``parse`` (the argparse ``type``), ``positional``,
    ``nargs``; ``no_help``: the help of a True bool's ``--no-...``, default "don't <help>"; ``check``:
    a validator the config runs on the value, unused by argparse).
    ``dataclasses.MISSING`` as ``default``: the flag (or argument) is required."""
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata={"help": help, **kwargs})
    return dataclasses.field(default=default, metadata={"help": help, **kwargs})


def flag(name: str) -> str:
    """The flag of config field ``name`` (``max_tokens`` -> ``--max-tokens``)."""
    return "--" + name.replace("_", "-")


def field_default(f: dataclasses.Field) -> Any:
    """A field's default (``MISSING`` when it has none)."""
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default


def _to_bool(text: str) -> bool:
    if text.lower() in ("yes", "true", "t", "y", "1"):
        return True
    if text.lower() in ("no", "false", "f", "n", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected a truth value (true/false), got {text!r}")


def _scalar(hint: Any) -> type:
    """The argparse type of a field's type hint: ``int | None`` -> int; a list (comma-separated
    on the command line, split by the config) -> str."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if any(typing.get_origin(a) is list for a in args):
            return str
        hint = args[0]
    return hint if hint in (bool, int, float, str) else str


def add_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, config: type,
                  defaults: dict[str, Any] | None = None) -> None:
    """One flag per field of the dataclass ``config`` (``--field-name``, its aliases first), with
    the field's default (or ``defaults[name]``), help, choices and type; a ``positional`` field
    is an argument. A bool defaulting to False is a switch; one defaulting to True also has ``--no-...``.
    A field holding a sub-config (a dataclass) adds its flags, defaulting to the field's default's values;
    a field declared without :func:`arg` is no flag (an object or setting only Python callers give)."""
    hints = typing.get_type_hints(config)
    for f in dataclasses.fields(config):
        if f.init and dataclasses.is_dataclass(hints[f.name]):  # (its own class's defaults are its fields')
            own = f.default_factory is hints[f.name]
            add_arguments(parser, hints[f.name], None if own else dataclasses.asdict(field_default(f)))
        if not f.init or "help" not in f.metadata:
            continue
        meta, kind = f.metadata, _scalar(hints[f.name])
        default = (defaults or {}).get(f.name, field_default(f))
        flags = (*meta.get("aliases", ()), flag(f.name))
        if meta.get("positional"):
            parser.add_argument(f.name, nargs=meta.get("nargs"), metavar=meta.get("metavar"), help=meta["help"])
        elif kind is bool and default is True:  # an optional truth value (--merge, --merge false) and --no-merge
            parser.add_argument(*flags, dest=f.name, type=_to_bool, nargs="?", const=True, default=True,
                                help=meta["help"])
            # its own help: the positive one's, negated, unless the field gives no_help
            parser.add_argument(flag("no_" + f.name), dest=f.name, action="store_false",
                                default=argparse.SUPPRESS, help=meta.get("no_help") or f"don't {meta['help']}")
        elif kind is bool:
            parser.add_argument(*flags, dest=f.name, action="store_true", help=meta["help"])
        else:
            parser.add_argument(*flags, dest=f.name, type=meta.get("parse", kind), help=meta["help"],
                                **({"required": True} if default is dataclasses.MISSING else {"default": default}),
                                **{key: meta[key] for key in ("choices", "metavar", "nargs") if key in meta})


class HelpFormatter(argparse.HelpFormatter):
    """Shows each flag's default (a list comma-separated), unless it is None or a switch's False
    (the help says what happens then)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default in (None, argparse.SUPPRESS) or action.default is False or not action.option_strings:
            return action.help
        shown = ",".join(map(str, action.default)) if isinstance(action.default, list) else "%(default)s"
        return f"{action.help} (default {shown})"


def flag_fields(config: type) -> list[dataclasses.Field]:
    """The fields of ``config`` that are flags, its sub-configs' included."""
    hints = typing.get_type_hints(config)
    return [g for f in dataclasses.fields(config) if f.init
            for g in (flag_fields(hints[f.name]) if dataclasses.is_dataclass(hints[f.name]) else [f])
            if "help" in g.metadata]


def from_namespace(config: type, args: argparse.Namespace) -> Any:
    """The config built from the parsed flags (its ``__post_init__`` checks them), its sub-configs too."""
    hints = typing.get_type_hints(config)
    return config(**{f.name: from_namespace(hints[f.name], args) if dataclasses.is_dataclass(hints[f.name])
                     else getattr(args, f.name) for f in dataclasses.fields(config) if f.init
                     and ("help" in f.metadata or dataclasses.is_dataclass(hints[f.name]))})
