"""Option checking and quantization spec parsing shared by the connectors."""

from __future__ import annotations

from typing import Any

from slimvec.errors import ConfigError

__all__ = ["check_options", "parse_quantization", "QUANTIZATIONS"]

#: Qdrant quantization names accepted by ``quant=``: scalar int8, binary (1, 1.5, 2 bits),
#: TurboQuant (1, 1.5, 2, 4 bits) and product quantization (compression ratio x4..x64).
QUANTIZATIONS = ("none", "sq8", "bq1", "bq1.5", "bq2", "tq1", "tq1.5", "tq2", "tq4",
                 "pq4", "pq8", "pq16", "pq32", "pq64")


def check_options(store: str, options: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Return ``defaults`` updated by ``options``, refusing unknown keys.

    Raises
    ------
    ConfigError
        An option the store does not know; the message lists the accepted ones.
    """
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ConfigError(f"Store {store!r} has no option(s) {', '.join(unknown)}. "
                          f"Accepted: {', '.join(sorted(defaults))}.")
    merged = dict(defaults)
    merged.update(options)
    return merged


def parse_quantization(value: Any) -> tuple[str, str | None]:
    """Split a ``quant=`` value into (family, level): ``"bq1.5"`` -> ``("bq", "1.5")``.

    Raises
    ------
    ConfigError
        Not one of :data:`QUANTIZATIONS`.
    """
    text = "none" if value in (None, False) else str(value).lower()
    if text not in QUANTIZATIONS:
        raise ConfigError(f"Unknown quantization {value!r}. Known: {', '.join(QUANTIZATIONS)}.")
    if text == "none":
        return "none", None
    return text[:2], text[2:]
