"""How an index is created over HTTP: a :class:`~slimvec.buildspec.BuildSpec` plus what only the
service needs until the reducer is fitted (``fit_after``, the input dimension), read from a
request and from ``ROOT/.pending/NAME/service.json`` by one parser.

``service.json`` is flat: the build spec's fields (:meth:`BuildSpec.to_dict`) beside the service's
own. Files written before the spec was typed hold a subset of those keys (reducer, store, encoder,
keep_full, fit_after, recipe, and later dim_in, payload_index) and load as they are: a missing
column takes the service's rule (documents: ``text`` / ``id``; vectors: none), a missing source
:data:`~slimvec.service.indexes.writer.SERVICE_INPUT`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from slimvec.buildspec import DEFAULTS, BuildSpec, check_metric, default_reducer
from slimvec.errors import ConfigError

__all__ = ["ServiceSpec", "SERVICE_SPEC", "DEFAULT_ENCODER", "DEFAULT_FIT_AFTER"]

#: the creation spec of an index collecting its fit sample, in ``ROOT/.pending/NAME``
SERVICE_SPEC = "service.json"
DEFAULT_ENCODER = "minilm"
DEFAULT_FIT_AFTER = 1000
#: the service's own keys of service.json, beside the build spec's
_OWN = ("fit_after", "dim_in")


def _service_input() -> str:
    from slimvec.service.indexes.writer import SERVICE_INPUT

    return SERVICE_INPUT


@dataclass(frozen=True)
class ServiceSpec:
    """A create request (``PUT /indexes/{name}``, a Qdrant ``PUT /collections/{name}``) as the
    service keeps it.

    Parameters
    ----------
    build : BuildSpec
        Reducer, store, encoder, full vectors, recipe, columns and source of the index; the
        store canonical once the registry accepted it.
    fit_after : int
        Documents collected before the reducer is fitted (an index created without a sample).
    dim_in : int or None
        Input dimension of a vector-only index, fixed by its first vectors (or the collection's
        size); ``None`` until then, and for text indexes (the encoder's).
    """

    build: BuildSpec
    fit_after: int = DEFAULT_FIT_AFTER
    dim_in: int | None = None

    # ------------------------------------------------------------------ the build's fields
    @property
    def reducer(self) -> str:
        return self.build.reducer or DEFAULTS["reducer"]

    @property
    def store(self) -> str:
        return self.build.store or DEFAULTS["store"]

    @property
    def encoder(self) -> str | None:
        return self.build.encoder

    @property
    def keep_full(self) -> str | None:
        return self.build.keep_full

    @property
    def recipe(self) -> str | None:
        return self.build.recipe

    def with_store(self, store: str) -> ServiceSpec:
        """The same spec with ``store`` (its canonical spelling)."""
        return replace(self, build=replace(self.build, store=store))

    def with_dim_in(self, dim: int) -> ServiceSpec:
        return replace(self, dim_in=int(dim))

    @property
    def payload_index(self) -> dict[str, str]:
        """Payload indexes declared at creation (the build spec's), built with the fitted store."""
        return self.build.payload_index or {}

    def with_payload_index(self, declared: dict[str, str]) -> ServiceSpec:
        return replace(self, build=replace(self.build, payload_index={**self.payload_index, **declared}))

    # ------------------------------------------------------------------ parsers
    @classmethod
    def from_request(cls, *, recipe: str | None, reducer: str | None, store: str | None,
                     keep_full: str | None, encoder: str | None, fit_after: int,
                     default_recipe: str | None, metric: str | None = None,
                     **encoding: Any) -> ServiceSpec:
        """What a create request asks for, as ``slimvec ingest`` reads its options: a request
        naming none of recipe, reducer, store, keep_full gets the service's default recipe
        (``slimvec serve --recipe``); a recipe with separate options that disagree is refused.
        ``metric`` (:data:`~slimvec.buildspec.METRICS`, default cosine): the reducer ``none``
        becomes the one that keeps it (:func:`recipe_for_metric`). ``encoding``: the spec's
        :data:`~slimvec.buildspec.ENCODING_FIELDS` asked for."""
        from slimvec.recipe import merge_recipe, parse_recipe, recipe_or_default

        recipe = recipe_or_default(recipe, reducer, store, keep_full, default_recipe)
        if recipe is not None:
            # a recipe is a string here, never a file on the server's disk (the operator's
            # --recipe default was resolved to its string when the server started)
            rec = merge_recipe(parse_recipe(recipe), reducer, store, keep_full, option="recipe")
            reducer, store, keep_full, recipe = rec.reducer, rec.store, rec.keep_full, str(rec)
        recipe, reducer = recipe_for_metric(recipe, reducer or DEFAULTS["reducer"],
                                            check_metric(metric or DEFAULTS["metric"]))
        build = _build(reducer, store or DEFAULTS["store"], encoder, keep_full, recipe)
        return cls(replace(build, metric=metric, **encoding), fit_after=fit_after)

    @classmethod
    def plain(cls, reducer: str = DEFAULTS["reducer"], store: str = DEFAULTS["store"],
              encoder: str | None = DEFAULT_ENCODER, keep_full: str | None = None,
              fit_after: int = DEFAULT_FIT_AFTER, recipe: str | None = None) -> ServiceSpec:
        """A spec from fields that already agree (no default recipe applied, nothing merged):
        the old ``IndexSpecIn(...)`` constructor."""
        return cls(_build(reducer, store, encoder, keep_full, recipe), fit_after=fit_after)

    def to_json(self) -> dict[str, Any]:
        """``service.json``'s object: the build spec's fields and the service's (the inverse of
        :meth:`from_json`)."""
        out = self.build.to_dict()
        out["fit_after"] = self.fit_after
        if self.dim_in is not None:
            out["dim_in"] = self.dim_in
        return out

    @classmethod
    def from_json(cls, data: Any, where: str = SERVICE_SPEC) -> ServiceSpec:
        """A spec from :meth:`to_json`'s object, or from an older server's subset of it.

        Raises
        ------
        ConfigError
            Not an object, an unknown key, or a value of the wrong type: names ``where`` and
            the field.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(data).__name__}; "
                              "delete the pending index and create it again.")
        own = {k: data[k] for k in _OWN if k in data}
        build = {k: v for k, v in data.items() if k not in _OWN}
        encoder = build.get("encoder")
        build.setdefault("text_column", "text" if encoder else None)
        build.setdefault("id_column", "id" if encoder else None)
        build.setdefault("source", _service_input())
        try:
            spec = BuildSpec.from_dict(build, where=where)
        except ConfigError as exc:  # a field's own check: say which file it is in
            if where in str(exc):
                raise
            raise ConfigError(f"{where}: {exc}") from exc
        fit_after = _whole(own.get("fit_after", DEFAULT_FIT_AFTER), "fit_after", where, 1)
        dim = own.get("dim_in")
        dim = None if dim is None else _whole(dim, "dim_in", where, 1)
        return cls(spec, fit_after=fit_after, dim_in=dim)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ServiceSpec:
        """Read ``service.json`` at ``path`` (:meth:`from_json`; errors name the file)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: cannot read the pending index's spec ({exc}); delete the "
                              "pending index and create it again.") from exc
        return cls.from_json(data, where=str(path))

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write ``service.json`` atomically (fsynced), as :meth:`to_json`."""
        from slimvec.persistence import write_json_atomic

        write_json_atomic(path, self.to_json())


def _build(reducer: str, store: str, encoder: str | None, keep_full: str | None,
           recipe: str | None) -> BuildSpec:
    """The build spec of a service index: documents have a ``text`` and an ``id``; vectors none."""
    return BuildSpec(reducer=reducer, store=store, encoder=encoder, keep_full=keep_full,
                     recipe=recipe, text_column="text" if encoder else None,
                     id_column="id" if encoder else None, source=_service_input())


def recipe_for_metric(recipe: str | None, reducer: str, metric: str) -> tuple[str | None, str]:
    """The recipe and reducer that keep ``metric``: the default reducer ``none`` L2-normalises,
    which drops the lengths Dot and Euclid rank by, so those indexes get
    :func:`~slimvec.buildspec.default_reducer` of their metric. Any other reducer is checked when
    the index is built (:func:`~slimvec.buildspec.check_reducer_metric`)."""
    from slimvec.recipe import parse_recipe

    if metric == "cosine" or reducer != "none":
        return recipe, reducer
    new = default_reducer(metric)
    return (None if recipe is None else str(replace(parse_recipe(recipe), reducer=new))), new


def _whole(value: Any, name: str, where: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{where}: field {name!r}: expected a whole number >= {least}, got "
                          f"{value!r}; delete the pending index and create it again.")
    return value

