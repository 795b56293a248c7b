"""Set-up's last step: the embedded models made ready once, in ``~/.cache/findbench`` (or
``$FINDBENCH_CACHE``), so that the first ``findbench main`` does not pay for them: SmolLM2-135M
converted from its GGUF to safetensors, and the synthetic entity neurons' probes fitted on its
features for the default dataset (seed 0; a few minutes, with a progress bar). Each is
cached and found again on a rerun, which then takes seconds."""

import time

from findbench.find.synthetic_neurons.entities import entity_probes
from findbench.models import resolve


def main() -> None:
    start = time.perf_counter()
    print(f"embedded LM: {resolve('embedded')}")
    _probes, info = entity_probes(0)
    print(f"entity probes (seed 0): {len(_probes)} fitted, cross-fitted AUC {info['cross_fitted_auc']:.3f}; "
          f"set-up's model step took {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
