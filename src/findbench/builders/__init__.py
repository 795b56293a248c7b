"""Dataset builders: ``datasets.GeneratorBasedBuilder`` subclasses and the folder writer.

- :mod:`findbench.builders.find`: the FIND dataset (``findbench build``).
- :mod:`findbench.builders.neuron_test_sets`: neuron-explanation test sets
  (``findbench build-neuron-tests``).
- :mod:`findbench.builders.folder`: runs a builder and writes the folder layout the Hub uses
  (parquet per config, README card with ``configs:``, provenance sidecar), atomically.

datasets 5 no longer runs loading scripts, so the package runs these builders; the files in
the checkout's top-level ``dataset_builders/`` re-export them for users who look there.
"""
