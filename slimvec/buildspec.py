"""What an index is built with: the one defaults table, the metric rules and :class:`BuildSpec`.

Every way of building an index (``slimvec ingest`` / ``migrate``, the Ray engine, the service)
takes its defaults from :data:`DEFAULTS` and asks :func:`default_reducer` /
:func:`default_recipe` for a new index that names nothing, so the default reducer (``none``), the
default recipe's store (``faiss:HNSW16,SQ4,ef=128,efc=200``, re-ranked) and the store of a build
that names only a reducer (``qdrant-edge``, full precision: nothing to re-rank from) are spelled
here only.

The metric (``cosine``, ``ip``, ``l2``) is the one the source's vectors are compared by; the
store, the full-vector rescoring, the calibration's exact truth and the search scores all use it.
What a reducer must be to keep it (:func:`check_reducer_metric`):

``cosine``  any reducer (they L2-normalise their output, what a cosine store expects; the default
            ``none`` keeps the full dimension).
``l2``      a reducer that does not L2-normalise its output (``normalize=false``): normalising
            throws away the lengths L2 ranks by. Centring is harmless (L2 distances do not
            change under a shift), and PCA is the projection that best keeps L2 distances.
``ip``      a linear map without offset, ``y = A x`` (``pca:D,center=false,normalize=false``, or
            ``none:normalize=false``): then ``<A q, A x> = <q, AᵀA x>``, the inner product of
            ``x``'s projection. Centring adds ``-<A m, A x>``, a term that depends on the
            candidate and so reorders results; normalising drops the lengths the inner product
            ranks by. Other reducers are refused.

Scores follow one convention: higher is closer; cosine and inner product as they are, L2 as the
negated squared distance.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

import numpy as np

from slimvec.errors import ConfigError, PersistenceError

if TYPE_CHECKING:
    from slimvec.encoder import Encoder

__all__ = [
    "DEFAULTS",
    "ENCODING_FIELDS",
    "METRICS",
    "PAYLOAD_INDEX_KINDS",
    "BuildSpec",
    "check_encoding",
    "check_fitted_reducer_metric",
    "check_metric",
    "check_reducer_metric",
    "default_recipe",
    "default_reducer",
    "parse_payload_indexes",
]

METRICS = ("cosine", "ip", "l2")

#: The one defaults table of a new index (a recipe named by the caller, e.g. ``slimvec serve
#: --recipe``, replaces the recipe). The default recipe (issue 28) keeps the full dimension, stores
#: 4-bit scalar codes (192 B per 384-d vector) in a FAISS HNSW graph built with hnswlib's beam
#: (efc=200) and searched with a beam of 128, and re-ranks from the full vectors kept on disk as
#: float16 at a depth calibrated on the corpus. On 300,000 real sentences it answered at 0.97-1.04x
#: the p50 of full-precision hnswlib (ef 128, the beam that reaches 0.99 there) with the same
#: recall@10 (0.992) in 0.23 of its serving RAM; reducing to 192 dimensions first saved RAM (0.18)
#: but its calibrated depth made it 1.65-1.75x slower (docs/benchmarks/default-recipe.md).
#: ``slimvec.recipe`` says why the recipe re-ranks.
DEFAULTS: dict[str, Any] = {
    "reducer": "none",
    # the store of a build that names a reducer but no store and no recipe: full-precision codes,
    # because such a build keeps no full vectors to re-rank from (the store before issue 28)
    "store": "qdrant-edge",
    # the default recipe's store: 4-bit codes whose candidates the recipe re-ranks from the full
    # vectors it keeps (docs/benchmarks/default-recipe.md)
    "recipe_store": "faiss:HNSW16,SQ4,ef=128,efc=200",
    "metric": "cosine",
    "rescore": "auto",
    "keep_full": "float16",
}

#: reducer options that keep each metric (see the module docstring); those the default reducer
#: has are applied to it
_METRIC_REDUCER_OPTIONS: dict[str, dict[str, Any]] = {
    "cosine": {}, "l2": {"normalize": False}, "ip": {"center": False, "normalize": False}}


def check_metric(metric: Any, where: str = "metric") -> str:
    """``metric`` if it is one of :data:`METRICS`, else :class:`ConfigError`."""
    if metric not in METRICS:
        raise ConfigError(f"{where}: unknown metric {metric!r}; expected one of "
                          f"{', '.join(METRICS)} (cosine similarity, inner product, L2 distance).")
    return str(metric)


def default_reducer(metric: str = "cosine") -> str:
    """The reducer spec of a new index that names none (``none``; for ``l2`` / ``ip`` with the
    options that keep that metric: ``none:normalize=false``)."""
    wanted = _METRIC_REDUCER_OPTIONS[check_metric(metric)]
    if not wanted:  # cosine: the spec as it is (no reducer import: the CLI's help texts ask)
        return str(DEFAULTS["reducer"])
    from slimvec.reducers import make_reducer

    known = make_reducer(DEFAULTS["reducer"]).get_params(deep=False)
    return _with(DEFAULTS["reducer"], **{k: v for k, v in wanted.items() if k in known})


def default_recipe(metric: str = "cosine") -> str:
    """The recipe of a new index that names no recipe, reducer, store or full vectors."""
    return (f"{default_reducer(metric)}|{DEFAULTS['recipe_store']}|rescore={DEFAULTS['rescore']},"
            f"keep_full={DEFAULTS['keep_full']}")


def _with(spec: str, **options: Any) -> str:
    from slimvec.reducers import make_reducer

    return str(make_reducer(spec, **options).spec)


def check_reducer_metric(reducer: Any, metric: str, where: str = "the index") -> None:
    """Refuse a reducer (unfitted is enough) that cannot keep ``metric`` (module docstring).

    Raises
    ------
    ConfigError
        Names the reducer, the metric, why, and the spec that keeps it.
    """
    if metric == "cosine":
        return
    spec = str(reducer.spec)
    fixes: dict[str, Any] = {}
    if getattr(reducer, "normalize", False):
        fixes["normalize"] = False
    if metric == "ip" and getattr(reducer, "center", False):
        fixes["center"] = False
    if fixes:
        why = ("L2-normalises its output, which drops the vector lengths the metric ranks by"
               if "normalize" in fixes else "")
        if "center" in fixes:
            why += (" and " if why else "") + ("subtracts the mean, which adds a term that depends "
                                               "on each candidate and reorders results")
        raise ConfigError(
            f"{where} compares vectors by {metric!r} but the reducer {spec!r} {why}. Use "
            f"--reducer {_with(spec, **fixes)} (recipe: the same reducer stage), or index by "
            "cosine (--metric cosine) if that is what the vectors mean.")
    from slimvec.reducers.linear import LinearReducer

    if metric == "ip" and reducer.name != "none" and (
            not isinstance(reducer, LinearReducer) or not hasattr(reducer, "center")):
        raise ConfigError(
            f"{where} compares vectors by 'ip' (inner product) but the reducer {spec!r} is not a "
            "linear map without offset (y = A x), the only kind that keeps inner products. Use "
            f"--reducer {default_reducer('ip')} (or none:normalize=false), or index by cosine "
            "(--metric cosine) if the vectors are normalised.")


def check_fitted_reducer_metric(reducer: Any, metric: str, where: str = "the index") -> None:
    """After the fit: an ``ip`` index's linear reducer must have learned no offset."""
    offset = getattr(reducer, "offset_", None)
    if metric == "ip" and offset is not None and np.any(np.asarray(offset) != 0):
        raise ConfigError(f"{where} compares vectors by 'ip' but the fitted reducer "
                          f"{reducer.spec!r} subtracts an offset; use {default_reducer('ip')}.")


#: the spec's fields that change how a text becomes a vector besides the model: recorded in the
#: manifest's ``encoding``, fixed for the index's life, shown by ``slimvec info`` and given to the
#: encoder :meth:`BuildSpec.load_encoder` hands out (a reopened index encodes as it was built)
ENCODING_FIELDS: tuple[str, ...] = ("doc_prefix", "query_prefix")
_STR_FIELDS = ("reducer", "store", "encoder", "keep_full", "text_column", "id_column", "source",
               "encoder_name", "recipe", "metric") + ENCODING_FIELDS


#: payload index kinds (``--payload-index FIELD:KIND``, :attr:`BuildSpec.payload_index`)
PAYLOAD_INDEX_KINDS = ("keyword", "integer", "float", "bool", "datetime")


def parse_payload_indexes(specs: Sequence[str] | None, where: str = "--payload-index") -> dict[str, str]:
    """``["lang:keyword", "year:integer"]`` -> ``{"lang": "keyword", "year": "integer"}``."""
    out: dict[str, str] = {}
    for spec in specs or []:
        field, sep, kind = str(spec).rpartition(":")
        if not sep or not field or kind not in PAYLOAD_INDEX_KINDS:
            raise ConfigError(f"{where} {spec!r}: expected FIELD:KIND with KIND one of "
                              f"{', '.join(PAYLOAD_INDEX_KINDS)} (e.g. lang:keyword).")
        out[field] = kind
    return out


def check_encoding(raw: Any, where: Any) -> dict[str, str]:
    """A manifest's ``encoding`` (:attr:`BuildSpec.encoding`), read from ``where``: only
    :data:`ENCODING_FIELDS`, each a string; missing reads as none set."""
    raw = {} if raw is None else raw
    if not isinstance(raw, dict) or any(k not in ENCODING_FIELDS or not isinstance(v, str)
                                        for k, v in raw.items()):
        raise PersistenceError(f"{where}: key 'encoding' should map some of "
                               f"{', '.join(ENCODING_FIELDS) or '(none known)'} to strings, got "
                               f"{raw!r:.80}. Restore the folder from a backup or rebuild the index.")
    return dict(raw)


@dataclass(frozen=True)
class BuildSpec:
    """What an index is built with: recipe (reducer, store, full vectors, rescoring), encoder,
    metric, columns and id rule. ``None`` fields are filled by
    :meth:`slimvec.indexer.builder.IndexBuilder.resolve` from the existing index, else from
    :data:`DEFAULTS`.

    Parameters
    ----------
    reducer, store : str or None
        Specs (``None``: the existing index's, or the defaults for the metric).
    encoder : str or None
        Encoder spec of text producers (``ingest``, the service); ``None`` for vector producers
        (``migrate``): the index is searched with vectors of the source's model.
    keep_full : str or None
        ``float32`` / ``float16``: keep full vectors for rescoring (new index; an existing index
        keeps its setting and a different explicit value is refused).
    text_column, id_column : str or None
        Recorded in the manifest.
    source : str or None
        Source spec recorded in the manifest (migrate).
    encoder_name : str or None
        The encoder's model name, recorded in the manifest.
    recipe : str or None
        Canonical recipe string (:mod:`slimvec.recipe`); its rescoring depth (fixed, or
        ``auto``: calibrated when the build finishes) becomes the default of searches.
        ``reducer``, ``store`` and ``keep_full`` must already agree with it.
    metric : str or None
        ``cosine``, ``ip`` or ``l2`` (module docstring). ``None``: the existing index's, or
        cosine; the default reducer of a new index follows it.
    id_rule : int or None
        How string ids become store ids (:mod:`slimvec.ids`); ``None``: the existing index's,
        or the current rule.
    doc_prefix, query_prefix : str or None
        Text put before every document / query before it is encoded, as models trained with
        them expect (E5: ``passage: `` / ``query: ``; BGE: a query instruction). ``None``: the
        existing index's, or none.
    payload_index : dict or None
        ``{field: kind}`` payload indexes (:data:`PAYLOAD_INDEX_KINDS`) the writer builds with the
        store, before the first document (an existing index gains those it lacks), and records
        in the manifest; filters on them use them.
    """

    reducer: str | None = None
    store: str | None = None
    encoder: str | None = None
    keep_full: str | None = None
    text_column: str | None = "text"
    id_column: str | None = None
    source: str | None = None
    encoder_name: str | None = None
    recipe: str | None = None
    metric: str | None = None
    id_rule: int | None = None
    doc_prefix: str | None = None
    query_prefix: str | None = None
    payload_index: dict[str, str] | None = None

    def __post_init__(self) -> None:
        for name in _STR_FIELDS:
            value = getattr(self, name)
            if isinstance(value, os.PathLike):  # a local encoder folder or source file
                value = os.fspath(value)
                object.__setattr__(self, name, value)
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"build spec field {name!r}: expected a string or null, got "
                                  f"{type(value).__name__} {value!r}.")
        if self.metric is not None:
            check_metric(self.metric, "build spec field 'metric'")
        if self.id_rule is not None and (isinstance(self.id_rule, bool)
                                         or not isinstance(self.id_rule, int)):
            raise ConfigError(f"build spec field 'id_rule': expected a whole number or null, got "
                              f"{self.id_rule!r}.")
        if self.payload_index is not None:
            if not isinstance(self.payload_index, dict):
                raise ConfigError("build spec field 'payload_index': expected an object of field -> "
                                  f"kind, got {self.payload_index!r:.80}.")
            object.__setattr__(self, "payload_index", parse_payload_indexes(
                [f"{k}:{v}" for k, v in self.payload_index.items()], "build spec field 'payload_index'"))

    def to_dict(self) -> dict[str, Any]:
        """Every field, JSON-ready (the inverse of :meth:`from_dict`, like ``get_params``)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Any, where: str = "build spec") -> BuildSpec:
        """A spec from :meth:`to_dict`'s form (missing keys take the defaults).

        Raises
        ------
        ConfigError
            Not an object, an unknown key (named with the known ones), a value of the wrong type.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(data).__name__}.")
        known = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; known: "
                              f"{', '.join(known)}.")
        return cls(**data)

    @classmethod
    def from_options(cls, opts: Any, **overrides: Any) -> BuildSpec:
        """A spec from a producer's options (``IngestOptions``, ``MigrateOptions``,
        ``RayOptions``: any object with some of these fields), then ``overrides``."""
        values = {f.name: getattr(opts, f.name) for f in fields(cls) if hasattr(opts, f.name)}
        values.update(getattr(opts, "encoding", None) or {})  # IngestOptions, Manifest
        values.update(overrides)
        return cls(**values)

    @classmethod
    def from_manifest(cls, manifest: Any) -> BuildSpec:
        """The spec an existing index was built with (its :class:`~slimvec.index.manifest.Manifest`)."""
        full = getattr(manifest, "full", None)  # the other fields by name, encoding included
        return cls.from_options(manifest, keep_full=full.dtype if full else None)

    @classmethod
    def reopen(cls, manifest: Any) -> BuildSpec:
        """The spec that reopens an existing index as it is (calibration, the service): only
        what :meth:`IndexBuilder.resolve` does not take from the manifest. The store is left
        unnamed, so a store outside the folder is still opened only when trusted."""
        return cls(encoder=manifest.encoder, text_column=manifest.text_column,
                   id_column=manifest.id_column, source=manifest.source, **manifest.encoding)

    @property
    def encoding(self) -> dict[str, Any]:
        """The :data:`ENCODING_FIELDS` this spec sets (as the manifest records them)."""
        return {k: getattr(self, k) for k in ENCODING_FIELDS if getattr(self, k) is not None}

    def load_encoder(self, device: str = "auto", batch_size: int = 64) -> Encoder:
        """The encoder of this spec's texts, documents and queries: the one place an index's
        :class:`~slimvec.encoder.Encoder` is built (model and :attr:`encoding`)."""
        from slimvec.encoder import Encoder

        return Encoder(self.encoder, device=device, batch_size=batch_size,
                       doc_prefix=self.doc_prefix or "", query_prefix=self.query_prefix or "")
