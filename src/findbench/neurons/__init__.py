"""Neuron-explanation evaluation (Huang et al. 2023, "Rigorously Assessing Natural Language
Explanations of Neurons").

- :mod:`~findbench.neurons.activations`: read/write MLP neuron activations through hooks
  (module locations per model family are data: ``MODEL_SITES``).
- :mod:`~findbench.neurons.huang2023`: import of the released observational test set.
- :mod:`~findbench.neurons.observational`: observational test sets for any causal LM.
- :mod:`~findbench.neurons.f1`: precision / recall / F1 of explanations (+ probe mode).
- :mod:`~findbench.neurons.intervention_tasks`: templated next-token tasks per concept.
- :mod:`~findbench.neurons.interventions`: interchange interventions and IIA@K sweeps.

Submodules import torch lazily through their own imports; import them directly.
"""

__all__ = ["activations", "huang2023", "observational", "f1", "intervention_tasks", "interventions"]
