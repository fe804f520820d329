"""The package version, in a module of its own so that code inside the package reads it without
importing the package root (no upward import, issue 35)."""

__version__ = "0.1.0"
