"""Registry of reducer spec names -> classes, imported lazily (torch only when needed)."""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from slimvec.errors import ConfigError
from slimvec.specs import Spec, parse_spec

__all__ = ["REDUCERS", "reducer_class", "make_reducer", "known_reducers", "MAX_COMPONENTS"]

#: most output dimensions a reducer spec may ask for (the largest vector any store holds)
MAX_COMPONENTS = 65536

#: spec name -> "module:Class". Add one line per reducer.
REDUCERS: dict[str, str] = {
    "none": "slimvec.reducers.identity:IdentityReducer",
    "pca": "slimvec.reducers.linear:PCAReducer",
    "leanvec": "slimvec.reducers.leanvec:LeanVecReducer",
    "whiten": "slimvec.reducers.projections:WhitenReducer",
    "svd": "slimvec.reducers.projections:SVDReducer",
    "rp": "slimvec.reducers.projections:RandomProjectionReducer",
    "truncate": "slimvec.reducers.projections:TruncateReducer",
    "algo": "slimvec.reducers.projections:AlgoReducer",
    "kpca": "slimvec.reducers.kernel:KernelPCAReducer",
    "ae": "slimvec.reducers.autoencoder:AutoencoderReducer",
    "umap": "slimvec.reducers.manifold:UMAPReducer",
    "embedtextnet": "slimvec.reducers.embedtextnet:EmbedTextNetReducer",
    "mcr2": "slimvec.reducers.mcr2:MCR2Reducer",
    "lle": "slimvec.reducers.locality:LLEReducer",
    "npe": "slimvec.reducers.locality:NPEReducer",
}


def known_reducers() -> list[str]:
    """Sorted spec names."""
    return sorted(REDUCERS)


def reducer_class(name: str) -> type:
    """Return the class registered under ``name``.

    Raises
    ------
    ConfigError
        Unknown name; the message lists the known ones.
    """
    target = REDUCERS.get(name.lower())
    if target is None:
        raise ConfigError(f"Unknown reducer {name!r}. Known: {', '.join(known_reducers())}.")
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)


def make_reducer(spec: str | Spec, **overrides: Any):
    """Build an unfitted reducer from a spec string such as ``pca:96,whiten=true``.

    Unknown options raise :class:`ConfigError` listing the accepted ones.
    """
    parsed = spec if isinstance(spec, Spec) else parse_spec(spec)
    klass = reducer_class(parsed.name)
    params = dict(parsed.options)
    if parsed.arg is not None:
        if klass.spec_arg is None:
            raise ConfigError(f"Reducer {parsed.name!r} takes no positional argument, got {parsed.arg!r}.")
        try:
            params[klass.spec_arg] = int(parsed.arg)
        except ValueError as exc:
            raise ConfigError(
                f"Reducer spec {str(parsed)!r}: {klass.spec_arg} must be an integer, got {parsed.arg!r}."
            ) from exc
    params.update(overrides)
    n_out = params.get("n_components")
    if n_out is not None and (isinstance(n_out, bool) or not isinstance(n_out, int)
                              or not 1 <= n_out <= MAX_COMPONENTS):
        raise ConfigError(
            f"Reducer spec {str(parsed)!r}: n_components={n_out!r} is out of range: expected a whole "
            f"number from 1 to {MAX_COMPONENTS} (the most dimensions a store holds), got {n_out!r}. "
            "It is the reduced dimension, at most the input's (e.g. pca:96 for 384-d vectors).")
    accepted = [p for p in inspect.signature(klass.__init__).parameters if p != "self"]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ConfigError(
            f"Reducer {parsed.name!r} has no option(s) {', '.join(unknown)}. "
            f"Accepted: {', '.join(accepted)}."
        )
    return klass(**params)
