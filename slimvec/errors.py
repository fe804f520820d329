"""The one error hierarchy of slimvec.

Every error is a :class:`SlimvecError` and also the matching built-in, so callers that already
catch ``ValueError`` or ``OSError`` keep working. Messages say what was expected, what came, and
what to do.
"""

from __future__ import annotations

__all__ = [
    "SlimvecError",
    "ConfigError",
    "DimensionMismatchError",
    "PersistenceError",
    "StoreError",
    "MissingDependencyError",
    "IndexBusyError",
]


class SlimvecError(Exception):
    """Base class of every error slimvec raises on purpose."""


class ConfigError(SlimvecError, ValueError):
    """A spec, option or input value is not usable (unknown reducer, NaN rows, bad column...)."""


class DimensionMismatchError(ConfigError):
    """Two parts disagree on a vector dimension; the message names both numbers."""

    def __init__(self, what: str, expected: int, got: int, hint: str = "") -> None:
        self.expected = int(expected)
        self.got = int(got)
        msg = f"{what}: expected dimension {expected}, got {got}."
        if hint:
            msg += f" {hint}"
        super().__init__(msg)


class PersistenceError(SlimvecError, OSError):
    """An artifact or index folder cannot be written or read safely; the message names the file."""


class StoreError(SlimvecError, RuntimeError):
    """A vector store failed or refused an operation."""


class IndexBusyError(StoreError):
    """The index is being written by another process."""


class MissingDependencyError(SlimvecError, ImportError):
    """An optional package is needed for the requested feature; the message says how to install it."""
