"""Network building blocks that are more than one plain nn.Module of fedpaper.blocks.models: the fixed
simplex-ETF and hypersphere classifiers (etf), torchvision's ResNets with or without ImageNet
weights (torchvision_nets), FedNCA-ML's label-aware disentanglement module with its backbones
(ladm), FedMT's ResNets and two-head networks (resnet). fedpaper.blocks.models registers the networks
built from them by name; nothing here imports fedpaper.blocks.models."""
