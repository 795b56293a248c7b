"""findbench: the FIND benchmark and neuron-explanation evaluation, the Hugging Face way."""

__version__ = "0.1.0"
