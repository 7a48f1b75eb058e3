"""Moved to fedpaper.engine.sequential (the engine is a package since issue 13); kept importable."""
from .engine.sequential import SUPPORTED, train_sequential  # noqa: F401
