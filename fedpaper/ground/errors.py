"""Errors that fedpaper shows to a user as one clear line: what is wrong and how to fix it."""


class FedpaperError(Exception):
    """Base class: the message is one line naming the problem and the fix."""


class BadParameterError(FedpaperError, ValueError):
    """A parameter is outside its allowed range (names the parameter, the value and the range)."""


class DataMissingError(FedpaperError, FileNotFoundError):
    """A data set is not on disk (names the data set, where it was looked for and how to get it)."""


class DataCorruptError(FedpaperError, ValueError):
    """A data file is truncated or garbled (names the file and how to replace it)."""


class UnknownNameError(FedpaperError, KeyError):
    """An unknown artifact id, data set, profile or method name (lists the known ones)."""

    def __str__(self):  # KeyError would otherwise quote the message
        return str(self.args[0]) if self.args else ""


# A notebook that stopped on one of these (raised inside its kernel; papermill reports the class
# name) failed on bad input: `fedpaper reproduce` and `papermill --engine fedpaper` exit with code 2.
BAD_INPUT_ERRORS = ("BadParameterError", "UnknownNameError", "DataMissingError")


def check_range(name, value, low=None, high=None, *, allowed=None):
    """Raise BadParameterError unless low <= value <= high (or value in allowed)."""
    if allowed is not None and value not in allowed:
        raise BadParameterError(f"{name}={value!r} is not allowed; choose one of {sorted(allowed)}")
    if (low is not None and value < low) or (high is not None and value > high):
        lo = "-inf" if low is None else low
        hi = "inf" if high is None else high
        raise BadParameterError(f"{name}={value!r} is out of range; it must lie in [{lo}, {hi}]")
    return value
