"""Neuron-explanation evaluation (Huang et al. 2023, "Rigorously Assessing Natural Language
Explanations of Neurons").

- :mod:`~findbench.sites`: read/write MLP neuron activations through hooks
  (module locations per model family are data: ``MODEL_SITES``).
- :mod:`~findbench.neuron_explanations.huang2023`: import of the released observational test set.
- :mod:`~findbench.neuron_explanations.observational`: observational test sets for any causal LM.
- :mod:`~findbench.neuron_explanations.f1`: precision / recall / F1 of explanations (+ probe mode).
- :mod:`~findbench.neuron_explanations.intervention_tasks`: templated next-token tasks per concept.
- :mod:`~findbench.neuron_explanations.interventions`: interchange interventions and IIA@K sweeps.
- :mod:`~findbench.neuron_explanations.iia`: the IIA score of intervention outputs (no torch).

Submodules import torch lazily through their own imports; import them directly.
"""

__all__ = ["huang2023", "observational", "f1", "intervention_tasks", "interventions", "iia"]
