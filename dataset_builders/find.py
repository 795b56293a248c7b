"""The FIND dataset builder (``findbench build``): see :mod:`findbench.builders.find`."""

from findbench.builders.find import Find, FindConfig, build  # noqa: F401 (re-exported)
