"""The index manifest (``manifest.json``) as a typed, versioned, validated record.

Every module that reads or writes an index's manifest goes through :class:`Manifest`:
:meth:`Manifest.read` checks every key's type and names the key, the expected and the found type
and how to rebuild when one is missing or wrong, so a damaged or hand-edited manifest fails with a
clear :class:`~slimvec.errors.PersistenceError` instead of a ``KeyError`` deep in a search.

Format versions
---------------
1
    The original format (no ``manifest_sha256``). Read and upgraded in memory; written back as 2
    by the next writer.
2
    Adds ``manifest_sha256``: SHA-256 of the manifest's own canonical JSON without that key. A
    mismatch (a hand edit or damage) is logged as a warning; it cannot be a security boundary
    (whoever edits the file can recompute it), so what protects a reader is that every key is
    validated, checksum keys must name files inside the folder, and an external store is only
    contacted when the user names it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from slimvec.buildspec import METRICS, check_encoding
from slimvec.errors import ConfigError, PersistenceError
from slimvec.index.search_costs import SearchCosts

log = logging.getLogger(__name__)

__all__ = ["Manifest", "Progress", "FullInfo", "RescoreInfo", "MANIFEST", "INDEX_FORMAT", "INDEX_FORMAT_VERSION"]

MANIFEST = "manifest.json"
INDEX_FORMAT = "slimvec-index"
INDEX_FORMAT_VERSION = 2
_REBUILD = ("Restore the folder from a backup, or rebuild the index (slimvec ingest ... --rebuild "
            "or slimvec migrate ... --rebuild).")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _check(path: Path, key: str, value: Any, types: tuple[type, ...], optional: bool) -> Any:
    if value is None and optional:
        return None
    ok = isinstance(value, types) and not (isinstance(value, bool) and bool not in types)
    if not ok:
        want = " or ".join(t.__name__ for t in types) + (" or null" if optional else "")
        raise PersistenceError(
            f"{path}: key {key!r} should be {want}, got {_type_name(value)} ({value!r:.60}). "
            + _REBUILD)
    return value


@dataclass
class Progress:
    """The durable progress record of the last (or running) write (see :mod:`.progress`).

    ``engine``, ``inputs`` and ``committed`` are written by a distributed engine only
    (``--engine ray``, :mod:`slimvec.engines.ray_ingest`; ``None`` for one process):
    ``inputs`` lists the run's files (``{"path", "fingerprint"}`` each, in file-index order) and
    ``committed`` the blocks of rows committed per file index (``{"0": [0, 1, 5], ...}``), so a
    rerun skips them. ``next_row`` then counts the rows of all committed blocks.
    """

    input: str | None = None
    fingerprint: dict[str, Any] | None = None
    columns: dict[str, Any] = field(default_factory=dict)
    next_row: int = 0
    state: str = "running"
    rejects_bytes: int = 0
    started: str = ""
    engine: str | None = None
    inputs: list[dict[str, Any]] | None = None
    committed: dict[str, list[int]] | None = None

    @classmethod
    def from_json(cls, path: Path, raw: Any) -> Progress | None:
        if raw is None:
            return None
        _check(path, "progress", raw, (dict,), False)
        out = cls(
            input=_check(path, "progress.input", raw.get("input"), (str,), True),
            fingerprint=_check(path, "progress.fingerprint", raw.get("fingerprint"), (dict,), True),
            columns=_check(path, "progress.columns", raw.get("columns", {}), (dict,), False),
            next_row=_check(path, "progress.next_row", raw.get("next_row", 0), (int,), False),
            state=_check(path, "progress.state", raw.get("state", "running"), (str,), False),
            rejects_bytes=_check(path, "progress.rejects_bytes", raw.get("rejects_bytes", 0),
                                 (int,), False),
            started=_check(path, "progress.started", raw.get("started", ""), (str,), False),
            engine=_check(path, "progress.engine", raw.get("engine"), (str,), True),
            inputs=_check(path, "progress.inputs", raw.get("inputs"), (list,), True),
            committed=_committed(path, raw.get("committed")),
        )
        for i, item in enumerate(out.inputs or []):
            _check(path, f"progress.inputs[{i}]", item, (dict,), False)
            _check(path, f"progress.inputs[{i}].path", item.get("path"), (str,), False)
            _check(path, f"progress.inputs[{i}].fingerprint", item.get("fingerprint"), (dict,),
                   False)
        for key in ("next_row", "rejects_bytes"):
            _at_least(path, f"progress.{key}", getattr(out, key), 0)
        if out.state not in ("running", "done"):
            raise PersistenceError(f"{path}: key 'progress.state' should be 'running' or 'done', "
                                   f"got {out.state!r}. " + _REBUILD)
        return out


@dataclass
class FullInfo:
    """Where ``--keep-full`` vectors live: ``dir`` (side file) or ``in_store`` (named vector)."""

    dtype: str
    dir: str | None = None
    in_store: bool = False

    @classmethod
    def from_json(cls, path: Path, raw: Any) -> FullInfo | None:
        if raw is None:
            return None
        _check(path, "full", raw, (dict,), False)
        out = cls(dtype=_check(path, "full.dtype", raw.get("dtype"), (str,), False),
                  dir=_check(path, "full.dir", raw.get("dir"), (str,), True),
                  in_store=_check(path, "full.in_store", raw.get("in_store", False), (bool,), False))
        if out.dir is not None:
            _check_relative(path, "full.dir", out.dir)
        _one_of(path, "full.dtype", out.dtype, FULL_DTYPES)
        return out


#: query vectors a rescoring depth was calibrated on (``slimvec calibrate --queries``), in the folder
CALIBRATION_QUERIES_FILE = "calibration-queries.safetensors"


def shortfall_message(recall: float, depth: int, target: float, k: int = 10) -> str:
    """``target not met: reached 0.9225 at depth cap 64 (target 0.99, neighbour recall@10)`` and
    what to do about it. The same text is shown by ``slimvec info``, the ingest / calibrate
    summaries and the service's index status."""
    return (f"target not met: reached {recall:.4f} at depth cap {depth} (target {target:g}, "
            f"neighbour recall@{k}); searches use depth {depth}, no deeper depth is tried. To meet "
            "it: a larger reducer dimension (e.g. --recipe 'pca:192|...'), a fixed deeper "
            "rescore=R, or a lower target (rescore=auto,target=0.95)")


_CORPUS_NOTE = (" on corpus vectors, which are held to half the recipe target's miss rate because a "
                "graph finds its own vectors' neighbours more easily than a query's")

@dataclass
class RescoreInfo:
    """The rescoring depth searches use by default (from the index's recipe).

    Attributes
    ----------
    depth : int
        Candidates per result re-ranked with the full vectors (``k × depth``).
    calibrated : bool
        True when ``rescore=auto`` measured it at build time; False: fixed by the recipe.
    recall, target, reached : float, float, bool or None
        Measured neighbour recall@k at ``depth``, the target, and whether it was reached.
    k, n_queries, n_corpus : int
        recall@k, sample size and vectors in the index when calibrated (0 when not).
    queries : str or None
        :data:`CALIBRATION_QUERIES_FILE` (``slimvec calibrate --queries``); None: corpus vectors.
    """

    depth: int
    calibrated: bool = False
    recall: float | None = None
    target: float | None = None
    k: int = 0
    n_queries: int = 0
    n_corpus: int = 0
    reached: bool | None = None
    queries: str | None = None

    @property
    def status(self) -> str | None:
        """What a calibrated depth achieved, for ``info``, the CLI summaries and the service's
        index status: ``target met: 0.9940 at depth 8 (target 0.99)`` or ``target not met:
        reached 0.9225 at depth cap 64 ...`` with what to do; ``None`` for a fixed depth."""
        if not self.calibrated or self.recall is None or self.target is None:
            return None
        if self.reached is False:
            return shortfall_message(float(self.recall), self.depth, float(self.target), self.k or 10)
        where = "" if self.queries is not None else _CORPUS_NOTE
        return f"target met: {float(self.recall):.4f} at depth {self.depth} (target {float(self.target):g}{where})"

    @classmethod
    def from_json(cls, path: Path, raw: Any) -> RescoreInfo | None:
        if raw is None:
            return None
        _check(path, "rescore", raw, (dict,), False)
        c = lambda key, types, optional=False, default=None: _check(  # noqa: E731
            path, f"rescore.{key}", raw.get(key, default), types, optional)
        out = cls(depth=c("depth", (int,)), calibrated=c("calibrated", (bool,), default=False),
                  recall=c("recall", (float, int), True), target=c("target", (float, int), True),
                  k=c("k", (int,), default=0), n_queries=c("n_queries", (int,), default=0),
                  n_corpus=c("n_corpus", (int,), default=0), reached=c("reached", (bool,), True),
                  queries=c("queries", (str,), True))
        if out.queries is not None and out.queries != CALIBRATION_QUERIES_FILE:
            raise PersistenceError(f"{path}: key 'rescore.queries' should be "
                                   f"{CALIBRATION_QUERIES_FILE!r} or absent, got {out.queries!r}. "
                                   + _REBUILD)
        _at_least(path, "rescore.depth", out.depth, 1)
        for key in ("k", "n_queries", "n_corpus"):
            _at_least(path, f"rescore.{key}", getattr(out, key), 0)
        for key in ("recall", "target"):
            value = getattr(out, key)
            if value is not None and not 0.0 <= float(value) <= 1.0:
                raise PersistenceError(f"{path}: key 'rescore.{key}' should be a recall in [0, 1], "
                                       f"got {value!r}. " + _REBUILD)
        return out


def _check_relative(path: Path, key: str, rel: str) -> None:
    """A name recorded in the manifest must be a plain relative path inside the index folder."""
    parts = Path(rel).parts
    if not rel or Path(rel).is_absolute() or ".." in parts or "\\" in rel:
        raise PersistenceError(
            f"{path}: {key} {rel!r} is not a plain relative name inside the index folder. A "
            "manifest may only refer to files of its own index. " + _REBUILD)


@dataclass
class Manifest:
    """Typed ``manifest.json`` of an index folder.

    Attributes
    ----------
    encoder : str or None
        Encoder spec (``None``: built from vectors by ``migrate``; queries are vectors).
    dim_in, dim_out : int
        Reducer input / output dimension.
    reducer, store, metric : str
        Canonical specs.
    count : int
        Stored points at the last commit.
    sha256 : dict
        SHA-256 of artifact files (``reducer/config.json``), keyed by relative name.
    store_sha256 : dict
        SHA-256 of snapshot-style store files, recorded when a run completes.
    progress : Progress or None
    full : FullInfo or None
    """

    dim_in: int
    dim_out: int
    reducer: str
    store: str
    encoder: str | None = None
    encoder_name: str | None = None
    metric: str = "cosine"
    count: int = 0
    created: str = field(default_factory=_now)
    updated: str = ""
    text_column: str | None = None
    id_column: str | None = None
    source: str | None = None
    #: how source ids become store ids (:data:`slimvec.ids.ID_RULE`); 1 for indexes made before
    #: rule 2, which keep their rule so re-ingesting them adds nothing
    id_rule: int = 1
    sha256: dict[str, str] = field(default_factory=dict)
    store_sha256: dict[str, str] = field(default_factory=dict)
    full: FullInfo | None = None
    progress: Progress | None = None
    #: canonical recipe string (:mod:`slimvec.recipe`) the index was built with; None before recipes
    recipe: str | None = None
    encoding: dict[str, str] = field(default_factory=dict)  #: :attr:`BuildSpec.encoding`
    #: default rescoring depth of searches (fixed by the recipe or calibrated); None: no rescoring
    rescore: RescoreInfo | None = None
    search_costs: SearchCosts | None = None  #: the filtered planner's costs, measured at build (issue 51)
    versions: dict[str, str] = field(default_factory=dict)
    format: str = INDEX_FORMAT
    format_version: int = INDEX_FORMAT_VERSION
    #: keys this slimvec does not know (a newer minor writer); kept on rewrite
    extra: dict[str, Any] = field(default_factory=dict)

    # ------------------------------------------------------------------ reading
    @classmethod
    def from_json(cls, raw: Any, path: Path) -> Manifest:
        """Validate a parsed manifest; version 1 is upgraded in memory."""
        if not isinstance(raw, dict):
            raise PersistenceError(f"{path}: expected a JSON object, got {_type_name(raw)}. "
                                   + _REBUILD)
        if raw.get("format") != INDEX_FORMAT:
            raise PersistenceError(
                f"{path}: expected format {INDEX_FORMAT!r}, got {raw.get('format')!r}. " + _REBUILD)
        version = raw.get("format_version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise PersistenceError(f"{path}: key 'format_version' should be a positive int, got "
                                   f"{_type_name(version)} ({version!r}). " + _REBUILD)
        if version > INDEX_FORMAT_VERSION:
            raise PersistenceError(
                f"{path}: format_version {version!r} is newer than this slimvec supports "
                f"({INDEX_FORMAT_VERSION}); upgrade slimvec.")
        if version >= 2:
            recorded = raw.get("manifest_sha256")
            if not isinstance(recorded, str) or recorded != _self_sha(raw):
                # a warning, not an error: hand-edited manifests are a supported repair path,
                # and every key is still validated below (a forger can recompute the sum anyway)
                log.warning("%s: the manifest's own checksum (manifest_sha256) does not match its "
                            "content: it was edited by hand or damaged since slimvec wrote it; "
                            "every key is checked again.", path)
        required = {"dim_in": (int,), "dim_out": (int,), "reducer": (str,), "store": (str,)}
        for key in required:
            if key not in raw:
                raise PersistenceError(f"{path}: key {key!r} is missing. " + _REBUILD)
        c = lambda key, types, optional=False, default=None: _check(  # noqa: E731
            path, key, raw.get(key, default), types, optional)
        out = cls(
            dim_in=c("dim_in", (int,)), dim_out=c("dim_out", (int,)),
            reducer=c("reducer", (str,)), store=c("store", (str,)),
            encoder=c("encoder", (str,), True), encoder_name=c("encoder_name", (str,), True),
            metric=c("metric", (str,), default="cosine"), count=c("count", (int,), default=0),
            created=c("created", (str,), default=""), updated=c("updated", (str,), default=""),
            text_column=c("text_column", (str,), True), id_column=c("id_column", (str,), True),
            source=c("source", (str,), True), id_rule=c("id_rule", (int,), default=1),
            sha256=_checksums(path, "sha256", raw.get("sha256")),
            store_sha256=_checksums(path, "store_sha256", raw.get("store_sha256")),
            full=FullInfo.from_json(path, raw.get("full")),
            progress=Progress.from_json(path, raw.get("progress")),
            recipe=_recipe(path, raw.get("recipe")), encoding=check_encoding(raw.get("encoding"), path),
            rescore=RescoreInfo.from_json(path, raw.get("rescore")), search_costs=SearchCosts.from_json(path, raw.get("search_costs")),
            versions=c("versions", (dict,), default={}),
            format_version=INDEX_FORMAT_VERSION,
        )
        _check_ranges(path, out)
        known = {f.name for f in fields(cls)} | {"manifest_sha256"}
        out.extra = {k: v for k, v in raw.items() if k not in known}
        return out

    @classmethod
    def read(cls, folder: str | os.PathLike[str]) -> Manifest:
        """Read, check and (from version 1) upgrade ``FOLDER/manifest.json``.

        Raises
        ------
        PersistenceError
            Not an index, a link instead of a file, unreadable JSON, a missing or ill-typed key
            (the message names it, the expected and the found type), a checksum mismatch.
        """
        from slimvec.index.safefs import read_text_nofollow

        path = Path(folder) / MANIFEST
        if not os.path.lexists(path):
            raise PersistenceError(f"{Path(folder)} is not a slimvec index (no {MANIFEST}). "
                                   "Create one with 'slimvec ingest' or 'slimvec migrate'.")
        text = read_text_nofollow(path)
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PersistenceError(f"{path} is not valid JSON ({exc}). " + _REBUILD) from exc
        return cls.from_json(raw, path)

    # ------------------------------------------------------------------ writing
    def to_json(self) -> dict[str, Any]:
        """The manifest as written to disk (a plain dict, with ``manifest_sha256``)."""
        out = {k: v for k, v in asdict(self).items() if k != "extra"}
        out.update(self.extra)
        out["format"], out["format_version"] = INDEX_FORMAT, INDEX_FORMAT_VERSION
        out["manifest_sha256"] = _self_sha(out)
        return out

    def write(self, folder: str | os.PathLike[str]) -> None:
        """Atomically write (fsynced), stamping versions and update time."""
        from slimvec.persistence import library_versions, write_json_atomic

        self.versions = library_versions()
        self.updated = _now()
        write_json_atomic(Path(folder) / MANIFEST, self.to_json())

    # ------------------------------------------------------------------ helpers
    @property
    def store_kind(self) -> str:
        """The store's name (``qdrant-edge``, ``faiss`` ...) without its options."""
        return self.store.partition(":")[0].strip().lower()

    @property
    def auto_rescore(self) -> bool:
        """True when the recipe calibrates its rescoring depth (``rescore=auto``)."""
        from slimvec.recipe import recipe_rescore

        return recipe_rescore(self.recipe) == "auto"

    @property
    def calibration_missing(self) -> bool:
        """An ``auto`` index holding vectors to calibrate on but no depth: its last run stopped
        between the final commit and the calibration (searches would not rescore)."""
        return self.auto_rescore and self.rescore is None and self.count >= 2

    @property
    def completed(self) -> bool:
        """True when no write was running at the last commit (or none ever started)."""
        return self.progress is None or self.progress.state == "done"

    def get(self, key: str, default: Any = None) -> Any:
        """Dict-style read of a top-level key (compatibility for code written for the dict)."""
        return self.to_json().get(key, default)

    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]


#: precisions of ``full.dtype`` (slimvec.connectors.fullvectors.FULL_DTYPES)
FULL_DTYPES = ("float32", "float16")
ID_RULES = (1, 2)  #: how source ids became store ids (slimvec.ids: rule 1 before issue 12, rule 2 since)
#: keys shown by ``slimvec info`` and written into messages: no terminal control characters
_PRINTED = ("encoder", "encoder_name", "reducer", "store", "metric", "created", "updated",
            "text_column", "id_column", "recipe")


def _at_least(path: Path, key: str, value: int, low: int) -> None:
    if value < low:
        raise PersistenceError(f"{path}: key {key!r} should be >= {low}, got {value!r}. "
                               + _REBUILD)


def _one_of(path: Path, key: str, value: Any, allowed: tuple[Any, ...]) -> None:
    if value not in allowed:
        raise PersistenceError(f"{path}: key {key!r} should be one of "
                               f"{', '.join(map(repr, allowed))}, got {value!r:.60}. " + _REBUILD)


def _check_ranges(path: Path, m: Manifest) -> None:
    """Values every reader relies on, beyond their types (issue 23: hand-edited fields such as a
    negative count or a control character in a spec were shown by ``slimvec info`` unchecked)."""
    for key, low in (("dim_in", 1), ("dim_out", 1), ("count", 0)):
        _at_least(path, key, getattr(m, key), low)
    _one_of(path, "metric", m.metric, METRICS)
    _one_of(path, "id_rule", m.id_rule, ID_RULES)
    for key in _PRINTED:
        value = getattr(m, key)
        if value is None:
            continue
        if not value.isprintable() and any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in value):
            raise PersistenceError(f"{path}: key {key!r} holds control characters "
                                   f"({value!r:.60}); a manifest written by slimvec never does. "
                                   + _REBUILD)
        if key in ("encoder", "reducer", "store", "metric") and not value.strip():
            raise PersistenceError(f"{path}: key {key!r} is empty. " + _REBUILD)


def _committed(path: Path, raw: Any) -> dict[str, list[int]] | None:
    """``progress.committed``: file index (a decimal string) -> sorted block numbers."""
    if raw is None:
        return None
    _check(path, "progress.committed", raw, (dict,), False)
    for key, blocks in raw.items():
        if not key.isdigit():
            raise PersistenceError(f"{path}: key 'progress.committed' should map file indexes "
                                   f"(decimal strings) to block lists, got key {key!r:.40}. "
                                   + _REBUILD)
        _check(path, f"progress.committed[{key!r}]", blocks, (list,), False)
        for b in blocks:
            _check(path, f"progress.committed[{key!r}] item", b, (int,), False)
            if b < 0:
                raise PersistenceError(f"{path}: progress.committed[{key!r}] holds the negative "
                                       f"block {b}. " + _REBUILD)
    return {k: list(v) for k, v in raw.items()}


def _recipe(path: Path, raw: Any) -> str | None:
    """A recorded recipe must parse (:func:`slimvec.recipe.parse_recipe`)."""
    if raw is None:
        return None
    _check(path, "recipe", raw, (str,), False)
    from slimvec.recipe import parse_recipe

    try:
        parse_recipe(raw)
    except ConfigError as exc:
        raise PersistenceError(f"{path}: key 'recipe' is not a valid recipe ({exc}). " + _REBUILD) from exc
    return raw


def _checksums(path: Path, key: str, raw: Any) -> dict[str, str]:
    if raw is None:
        return {}
    _check(path, key, raw, (dict,), False)
    for rel, digest in raw.items():
        _check_relative(path, f"{key} key", rel)
        _check(path, f"{key}[{rel!r}]", digest, (str,), False)
    return dict(raw)


def _self_sha(raw: dict[str, Any]) -> str:
    body = {k: v for k, v in raw.items() if k != "manifest_sha256"}
    text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
