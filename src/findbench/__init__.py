"""findbench: the FIND benchmark and neuron-explanation evaluation, the Hugging Face way."""

__version__ = "0.1.0"

from .functions import generate_rows, load_function, load_rows  # noqa: E402

__all__ = ["__version__", "generate_rows", "load_function", "load_rows"]
