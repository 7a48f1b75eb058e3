"""The building blocks every paper trains with: data sets and their loaders (`data/`), partitioners
(`partition`), network architectures (`nets/`) and the model registry (`models`), metrics (`metrics`).
They import only the ground layer (ARCHITECTURE.md)."""
