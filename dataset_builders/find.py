"""The FIND dataset builder (``findbench build``): see :mod:`findbench.builders.find`."""

from findbench.builders.find import Find, FindConfig, build

__all__ = ["Find", "FindConfig", "build"]
