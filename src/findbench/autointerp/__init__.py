"""AutoInterp for sparse-autoencoder latents (SAEBench's method, plus more scorers and
planted-feature validation)."""
