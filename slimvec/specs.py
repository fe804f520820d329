"""Spec strings: ``name:positional,key=value,...`` for reducers, stores and encoders.

``pca:96`` -> ``Spec("pca", "96", {})``; ``kpca:128,kernel=rbf,gamma=0.5`` ->
``Spec("kpca", "128", {"kernel": "rbf", "gamma": 0.5})``; ``hnsw:M=16,ef=64`` ->
``Spec("hnsw", None, {"M": 16, "ef": 64})``. Values are parsed as bool, int, float or left as str.
:func:`format_spec` prints the canonical form back, so results, file names and ``slimvec info``
agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slimvec.errors import ConfigError

__all__ = ["Spec", "parse_spec", "format_spec", "parse_value"]


@dataclass(frozen=True)
class Spec:
    """A parsed spec string.

    Attributes
    ----------
    name : str
        The registry key (``pca``, ``faiss``...).
    arg : str or None
        The first bare (``key=``-less) argument, e.g. ``96`` or a path / factory string.
    options : dict
        ``key=value`` options, values parsed by :func:`parse_value`.
    """

    name: str
    arg: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return format_spec(self.name, self.arg, self.options)


def parse_value(text: str) -> Any:
    """Parse ``true``/``false``/ints/floats, leaving anything else as a string."""
    low = text.strip().lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip()


def parse_spec(text: str, *, arg_may_contain_commas: bool = False) -> Spec:
    """Parse ``name[:arg][,key=value...]``.

    Parameters
    ----------
    text : str
        The spec string.
    arg_may_contain_commas : bool
        When true (FAISS factory strings such as ``IVF256,PQ16``), every comma-separated part
        without ``=`` belongs to the bare argument.

    Raises
    ------
    ConfigError
        Empty name or a malformed ``key=value`` part.
    """
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"Empty spec {text!r}: expected 'name' or 'name:arg,key=value'.")
    text = text.strip()
    name, _, rest = text.partition(":")
    name = name.strip().lower()
    if not name:
        raise ConfigError(f"Spec {text!r} has no name before ':'.")
    arg_parts: list[str] = []
    options: dict[str, Any] = {}
    if rest:
        for part in rest.split(","):
            if "=" in part:
                key, _, value = part.partition("=")
                if not key.strip():
                    raise ConfigError(f"Spec {text!r}: option {part!r} has no key (use key=value).")
                options[key.strip()] = parse_value(value)
            elif part.strip():
                arg_parts.append(part.strip())
    if len(arg_parts) > 1 and not arg_may_contain_commas:
        raise ConfigError(
            f"Spec {text!r}: more than one bare argument {arg_parts}; options must be key=value."
        )
    arg = ",".join(arg_parts) if arg_parts else None
    return Spec(name, arg, options)


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return repr(value)
    return str(value)


def format_spec(name: str, arg: Any = None, options: dict[str, Any] | None = None) -> str:
    """Print the canonical spec string: options sorted, ``None`` values left out."""
    parts = [] if arg is None else [str(arg)]
    for key in sorted(options or {}):
        value = (options or {})[key]
        if value is not None:
            parts.append(f"{key}={_fmt(value)}")
    return name if not parts else f"{name}:{','.join(parts)}"
