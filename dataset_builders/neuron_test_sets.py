"""The neuron-explanation test-set builder (``findbench build-neuron-tests``): see
:mod:`findbench.builders.neuron_test_sets`."""

from findbench.builders.neuron_test_sets import NeuronTestSets, NeuronTestSetsConfig, build  # noqa: F401 (re-exported)
