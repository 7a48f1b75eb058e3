"""Client objectives and server aggregators; see methods.Method for how they compose."""
from .methods import Method, get_method, standard_methods

__all__ = ["Method", "get_method", "standard_methods"]
