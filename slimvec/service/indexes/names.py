"""Index names: validated, and always resolved to a folder directly under the root."""

from __future__ import annotations

import re
from pathlib import Path

from slimvec.errors import ConfigError

__all__ = ["index_folder", "check_name", "NAME_RE", "MAX_NAME"]

MAX_NAME = 64
#: matched with ``fullmatch``: ``$`` would also match before a trailing newline (``"docs\n"``)
#: (``~`` joins a Qdrant collection's name and a vector name: the index of that named vector)
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._~-]{0,63}")


def check_name(name: str) -> str:
    """Return ``name`` if it is a valid index name, else raise :class:`ConfigError`."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or ".." in name:
        raise ConfigError(
            f"Invalid index name {str(name)[:80]!r}: use 1-{MAX_NAME} letters, digits, '.', '_', "
            "'-' or '~', starting with a letter or digit, without '..' or '/'."
        )
    return name


def index_folder(root: Path, name: str) -> Path:
    """The folder of index ``name`` under ``root``; never outside it (symlinks included)."""
    check_name(name)
    base = root.resolve()
    folder = (base / name)
    real = folder.resolve()
    if real.parent != base:
        raise ConfigError(f"Index {name!r} resolves outside the served root; refusing it.")
    return folder
