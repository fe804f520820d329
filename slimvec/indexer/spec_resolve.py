"""Spec resolution of the index writer: a producer's :class:`~slimvec.buildspec.BuildSpec` against
the index already in the folder (or the defaults), and what a store cannot hold.

Split out of :class:`~slimvec.indexer.builder.IndexBuilder` (issue 24 item 2).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from slimvec.buildspec import DEFAULTS, BuildSpec, check_metric, default_reducer
from slimvec.errors import ConfigError
from slimvec.index.manifest import Manifest
from slimvec.indexer.keepfull import check_keep_full, check_recipe
from slimvec.reducers import make_reducer

__all__ = ["resolve_spec", "refuse_store_dim"]


def resolve_spec(folder: Path, old: Manifest | None, spec: BuildSpec) -> BuildSpec:
    """Fill a spec's unset fields from the existing index ``old`` (or the defaults) and check
    that the set ones agree with it.

    Parameters
    ----------
    folder : Path
        The index folder (for messages).
    old : Manifest or None
        The existing index's manifest (``None``: a new index).
    spec : BuildSpec
        What the producer asked for.

    Returns
    -------
    BuildSpec
        Every field set.

    Raises
    ------
    ConfigError
        The existing index was built with other specs, or text is written into an index
        built from another model's vectors (``encoder: null``), or the reverse.
    """
    from slimvec.connectors import canonical_store_spec

    check_keep_full(spec.keep_full)
    check_recipe(spec)
    if spec.metric is not None:
        check_metric(spec.metric, f"the metric asked for {folder}")
    if old is None:
        metric = spec.metric or DEFAULTS["metric"]
        return replace(spec, reducer=spec.reducer or default_reducer(metric), metric=metric,
                       store=canonical_store_spec(spec.store or DEFAULTS["store"]))
    if old.encoder is None and spec.encoder is not None:
        raise ConfigError(
            f"{folder} already holds an index built with encoder None (asked "
            f"{spec.encoder!r}): 'slimvec migrate' built it from vectors of another model, and "
            "text encoded now would mix two vector spaces. Search it with vectors of the "
            "original model, ingest text into another --index folder, or --rebuild it.")
    had_full = old.full.dtype if old.full else None
    diffs = _differences(old, spec, had_full)
    if diffs:
        raise ConfigError(
            f"{folder} already holds an index built with {', '.join(diffs)}. Use the same "
            "specs to add to it, another --index folder, or --rebuild to delete it and build "
            "anew.")
    return replace(spec, reducer=old.reducer, store=old.store, encoder=old.encoder,
                   keep_full=had_full, recipe=old.recipe, metric=old.metric,
                   id_rule=old.id_rule, **cast(dict[str, Any], old.encoding))


def _differences(old: Manifest, spec: BuildSpec, had_full: str | None) -> list[str]:
    """What ``spec`` asks that the existing index was not built with, one phrase each."""
    from slimvec.connectors import canonical_store_spec

    diffs = []
    if old.encoder is not None and spec.encoder is None:
        diffs.append(f"encoder {old.encoder!r} (a migration has none)")
    elif spec.encoder is not None and old.encoder != spec.encoder:
        diffs.append(f"encoder {old.encoder!r} (asked {spec.encoder!r})")
    if spec.reducer is not None and old.reducer not in (spec.reducer,
                                                        make_reducer(spec.reducer).spec):
        diffs.append(f"reducer {old.reducer!r} (asked {spec.reducer!r})")
    if spec.store is not None and old.store != canonical_store_spec(spec.store):
        diffs.append(f"store {old.store!r} (asked {spec.store!r})")
    if spec.keep_full is not None and had_full != spec.keep_full:
        diffs.append(f"full vectors {had_full!r} (asked --keep-full {spec.keep_full!r})")
    if spec.recipe is not None and old.recipe != spec.recipe:
        diffs.append(f"recipe {old.recipe!r} (asked {spec.recipe!r})")
    if spec.metric is not None and old.metric != spec.metric:
        diffs.append(f"metric {old.metric!r} (asked {spec.metric!r})")
    if spec.id_rule is not None and old.id_rule != spec.id_rule:
        diffs.append(f"id rule {old.id_rule} (asked {spec.id_rule})")
    diffs += [f"{key} {old.encoding.get(key)!r} (asked {value!r})"
              for key, value in spec.encoding.items() if old.encoding.get(key) != value]
    return diffs


def refuse_store_dim(store_spec: Any, n_out: Any, folder: Path) -> None:
    """:class:`ConfigError` when the store cannot hold ``n_out``-d vectors (FAISS ``PQ7`` at 8
    dimensions, an IVF whose centroids alone would take gigabytes...), before anything is built."""
    from slimvec.connectors import store_dim_problem

    if isinstance(n_out, int) and not isinstance(n_out, bool):
        problem = store_dim_problem(store_spec, n_out)
        if problem:
            raise ConfigError(f"{problem}. Nothing was created in {folder}: choose a reducer size "
                              "and a store spec that fit together.")
