"""The package version, in a leaf module: submodules import it from here, never from the root."""

__version__ = "0.1.0"
