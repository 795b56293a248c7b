"""The package's public names resolve lazily (the metric imports the package without torch)."""

from __future__ import annotations

import pytest

import findbench.autointerp as autointerp


@pytest.mark.parametrize("name", autointerp.__all__)
def test_every_public_name_resolves_to_its_module_attribute(name):
    import importlib

    (module,) = [importlib.import_module(m) for m, names in autointerp._MODULES.items() if name in names]
    assert getattr(autointerp, name) is getattr(module, name)


def test_unknown_names_raise_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'bogus'"):
        autointerp.bogus  # noqa: B018
