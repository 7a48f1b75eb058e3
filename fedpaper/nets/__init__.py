"""Network building blocks that are more than one plain nn.Module of fedpaper.models: the fixed
simplex-ETF and hypersphere classifiers (etf) and FedNCA-ML's label-aware disentanglement module
with its backbones (ladm), FedMT's ResNets and two-head networks (resnet). fedpaper.models
registers the networks built from them by name."""
