"""fedpaper: a reproducible companion to four federated-learning papers on label heterogeneity."""

__version__ = "0.1.0"
