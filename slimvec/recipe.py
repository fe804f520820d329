"""A recipe: reducer → store (often quantized) → rescoring from full vectors, as one configuration.

In the spirit of FAISS's ``index_factory``, a recipe is one string of ``|``-separated stages::

    REDUCER | STORE [| key=value[,key=value...]]...

    pca:192|faiss:HNSW32,SQ8|rescore=4
    pca:96|hnsw:M=16,ef=64|rescore=auto,target=0.99
    none|faiss:HNSW32,SQ8|rescore=2,keep_full=float16
    leanvec:128|qdrant-edge:quant=sq8

- ``REDUCER`` is a reducer spec (``none`` for the full dimension), ``STORE`` a store spec; both are
  the specs ``--reducer`` and ``--store`` take (a FAISS factory keeps its commas: the stage
  separator is ``|``, which no spec uses).
- Options after the store (several per stage, comma-separated, or one stage each):

  ``rescore=R``         re-rank ``k × R`` candidates with the full vectors (R ≥ 1), or
  ``rescore=auto``      R calibrated at build time (:func:`slimvec.indexer.calibrate.calibrate_rescore`)
                        as the smallest depth whose measured neighbour recall@k reaches ``target``;
  ``target=0.99``       recall@k target of ``rescore=auto`` (0 < target ≤ 1; default 0.99);
  ``keep_full=float16`` dtype of the full vectors kept on disk (``float16`` or ``float32``);
                        defaults to :data:`DEFAULT_KEEP_FULL` (``float16``, the default recipe's)
                        when rescoring, ``none`` otherwise (the canonical string names it only
                        when it differs from that default).

A recipe is saved as JSON (``tuned.json``, written by ``slimvec tune``)::

    {"format": "slimvec-recipe", "version": 1,
     "recipe": "pca:192|faiss:HNSW32,SQ8|rescore=4", "reducer": "pca:192",
     "store": "faiss:HNSW32,SQ8", "rescore": 4, "keep_full": "float16",
     "target_recall": 0.99, "measured": {...}, "runners_up": [...]}

``recipe`` and the separate fields must agree; ``measured`` and ``runners_up`` are free-form
records of how the recipe was chosen and are kept as they are.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from slimvec.buildspec import DEFAULTS, default_recipe
from slimvec.errors import ConfigError, PersistenceError

__all__ = ["Recipe", "named_keep_full", "DEFAULT_KEEP_FULL", "parse_recipe", "recipe_rescore", "load_recipe", "save_recipe", "resolve_recipe", "merge_recipe", "apply_recipe",
           "apply_default_recipe", "recipe_or_default", "DEFAULT_RECIPE", "recipe_grid", "AUTO_LADDER", "RECIPE_FORMAT", "RECIPE_VERSION", "DEFAULT_TARGET", "KEEP_FULL_DTYPES"]

RECIPE_FORMAT = "slimvec-recipe"
RECIPE_VERSION = 1
DEFAULT_TARGET = 0.99
KEEP_FULL_DTYPES = ("float32", "float16")
#: the precision of the kept full vectors wherever none is named: a rescoring recipe, ``--keep-full``
#: without ``--full-dtype``, the default recipe (issue 40 item 6: one default everywhere, so a
#: ``slimvec rebuild`` never silently doubles the side file)
DEFAULT_KEEP_FULL = "float16"
_OPTIONS = ("rescore", "target", "keep_full")

Rescore = int | str | None


def _check_rescore(value: Any, where: str) -> Rescore:
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "auto":
            return "auto"
        if text in ("none", "off", "false"):
            return None
        try:
            value = int(text)
        except ValueError:
            raise ConfigError(f"{where}: rescore must be a positive integer or 'auto', got {value!r} "
                              "(e.g. rescore=4 or rescore=auto).") from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{where}: rescore must be a positive integer or 'auto', got {value!r}.")
    if value < 1:
        raise ConfigError(f"{where}: rescore must be >= 1 (candidates per result), got {value}; "
                          "leave it out to search without rescoring.")
    return int(value)


@dataclass(frozen=True)
class Recipe:
    """Reducer → store → rescoring, as one validated configuration.

    Attributes
    ----------
    reducer : str
        Canonical reducer spec (``none``: full dimension).
    store : str
        Canonical store spec.
    rescore : int, ``"auto"`` or None
        Candidates per result re-ranked with the full vectors; ``"auto"``: calibrated at build time.
    keep_full : str or None
        dtype of the full vectors kept on disk (``float32``/``float16``); required to rescore.
    target_recall : float
        Neighbour recall@k that ``rescore="auto"`` calibrates for.
    measured : dict
        Free-form record of how the recipe was chosen (``slimvec tune``).
    runners_up : list of dict
        Free-form table of the candidates that lost.
    """

    reducer: str = DEFAULTS["reducer"]
    store: str = DEFAULTS["store"]
    rescore: Rescore = None
    keep_full: str | None = None
    target_recall: float = DEFAULT_TARGET
    measured: dict[str, Any] = field(default_factory=dict, compare=False)
    runners_up: list[dict[str, Any]] = field(default_factory=list, compare=False)

    def __post_init__(self) -> None:
        from slimvec.connectors import canonical_store_spec

        where = f"Recipe {self.reducer}|{self.store}"
        try:
            reducer = "none"
            if str(self.reducer).strip().lower() != "none":  # 'none' imports no reducer (sklearn)
                from slimvec.reducers import make_reducer

                reducer = make_reducer(self.reducer).spec
        except ConfigError as exc:
            raise ConfigError(f"{where}: reducer stage: {exc}") from exc
        try:
            store = canonical_store_spec(self.store)
        except ConfigError as exc:
            raise ConfigError(f"{where}: store stage: {exc}") from exc
        rescore = _check_rescore(self.rescore, where)
        keep = self.keep_full
        if isinstance(keep, str) and keep.strip().lower() in ("none", "false", "off", ""):
            keep = None
        if keep is not None and keep not in KEEP_FULL_DTYPES:
            raise ConfigError(f"{where}: keep_full must be one of {', '.join(KEEP_FULL_DTYPES)} or none, "
                              f"got {keep!r}.")
        if rescore is not None and keep is None:
            if self.keep_full is not None:  # explicitly "none"
                raise ConfigError(f"{where}: rescore={rescore} needs the full vectors on disk, but "
                                  "keep_full=none. Drop keep_full=none or the rescore option.")
            keep = DEFAULT_KEEP_FULL
        target = self.target_recall
        if isinstance(target, bool) or not isinstance(target, (int, float)) or not 0.0 < float(target) <= 1.0:
            raise ConfigError(f"{where}: target must be a recall in (0, 1], got {target!r} (e.g. target=0.99).")
        object.__setattr__(self, "reducer", reducer)
        object.__setattr__(self, "store", store)
        object.__setattr__(self, "rescore", rescore)
        object.__setattr__(self, "keep_full", keep)
        object.__setattr__(self, "target_recall", float(target))

    # ------------------------------------------------------------------ strings
    @property
    def auto_rescore(self) -> bool:
        """True when the rescoring depth is calibrated at build time."""
        return self.rescore == "auto"

    def __str__(self) -> str:
        """The canonical recipe string (round-trips through :func:`parse_recipe`)."""
        opts: list[str] = []
        if self.rescore is not None:
            opts.append(f"rescore={self.rescore}")
        if self.auto_rescore:
            opts.append(f"target={self.target_recall:g}")
        default_keep = DEFAULT_KEEP_FULL if self.rescore is not None else None
        if self.keep_full != default_keep:
            opts.append(f"keep_full={self.keep_full or 'none'}")
        return "|".join([self.reducer, self.store] + ([",".join(opts)] if opts else []))

    def dim_out(self, dim_in: int) -> int:
        """Dimension the reducer stage writes for ``dim_in``-dimensional input (``none``: the same)."""
        if self.reducer == "none":
            return int(dim_in)
        from slimvec.reducers import make_reducer

        n = getattr(make_reducer(self.reducer), "n_components", None)
        return int(n) if isinstance(n, int) else int(dim_in)

    def with_depth(self, depth: int) -> Recipe:
        """This recipe with a fixed rescoring depth (after calibration)."""
        return replace(self, rescore=int(depth))

    # --------------------------------------------------------------------- JSON
    def to_json(self) -> dict[str, Any]:
        """The ``tuned.json`` form (see the module docstring)."""
        return {"format": RECIPE_FORMAT, "version": RECIPE_VERSION, "recipe": str(self),
                "reducer": self.reducer, "store": self.store, "rescore": self.rescore,
                "keep_full": self.keep_full, "target_recall": self.target_recall,
                "measured": self.measured, "runners_up": self.runners_up}

    @classmethod
    def from_json(cls, data: dict[str, Any], where: str = "recipe JSON") -> Recipe:
        """Inverse of :meth:`to_json`; a bare ``{"recipe": "..."}`` is accepted too.

        Raises
        ------
        ConfigError
            Wrong format or version, unknown keys, fields that disagree with ``recipe``.
        """
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a JSON object, got {type(data).__name__}.")
        fmt = data.get("format", RECIPE_FORMAT)
        if fmt != RECIPE_FORMAT:
            raise ConfigError(f"{where}: format {fmt!r} is not {RECIPE_FORMAT!r}; is this a recipe file?")
        version = data.get("version", RECIPE_VERSION)
        if not isinstance(version, int) or version > RECIPE_VERSION:
            raise ConfigError(f"{where}: recipe version {version!r} is newer than this slimvec reads "
                              f"({RECIPE_VERSION}); upgrade slimvec.")
        known = {"format", "version", "recipe", "reducer", "store", "rescore", "keep_full",
                 "target_recall", "measured", "runners_up"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}.")
        extras = {"measured": dict(data.get("measured") or {}),
                  "runners_up": list(data.get("runners_up") or [])}
        fields = {k: data[k] for k in ("reducer", "store", "rescore", "keep_full", "target_recall")
                  if k in data}
        if "recipe" in data:
            base = parse_recipe(str(data["recipe"]))
            if "keep_full" in fields and named_keep_full(str(data["recipe"])) is None:
                base = replace(base, keep_full=fields["keep_full"])  # written when float32 was implied
            from_fields = replace(base, **fields) if fields else base
            if from_fields != base:
                raise ConfigError(f"{where}: 'recipe' says {base} but the separate fields say "
                                  f"{from_fields}; fix one of them.")
            return replace(base, **extras)
        if "reducer" not in fields or "store" not in fields:
            raise ConfigError(f"{where}: needs 'recipe' (e.g. \"pca:96|hnsw|rescore=4\") or both "
                              "'reducer' and 'store'.")
        return cls(**fields, **extras)


def parse_recipe(text: str) -> Recipe:
    """Parse a recipe string ``REDUCER|STORE[|key=value,...]`` (see the module docstring).

    Raises
    ------
    ConfigError
        Fewer than two stages, an unknown option, a bad value, an unknown reducer or store.
    """
    stages, options = _stages_and_options(text)
    target: Any = DEFAULT_TARGET
    if "target" in options:
        try:
            target = float(options["target"])
        except ValueError:
            raise ConfigError(f"Recipe {text!r}: target must be a number in (0, 1], "
                              f"got {options['target']!r}.") from None
        if options.get("rescore", "").lower() != "auto":
            raise ConfigError(f"Recipe {text!r}: target applies to rescore=auto only.")
    return Recipe(reducer=stages[0], store=stages[1], rescore=options.get("rescore"),
                  keep_full=options.get("keep_full"), target_recall=target)


def named_keep_full(value: str | os.PathLike[str]) -> str | None:
    """The ``keep_full`` a recipe (string or JSON file) names itself; None when it leaves the
    precision to the default (``slimvec rebuild`` then keeps the index's own)."""
    text = str(value)
    if text.lower().endswith(".json") or ("|" not in text and Path(text).is_file()):
        return load_recipe(text).keep_full
    return _stages_and_options(text)[1].get("keep_full")


def recipe_rescore(text: str | None) -> Rescore:
    """The rescoring depth a recipe string names (an int, ``"auto"``, or None), parsed like
    :func:`parse_recipe` but without building its reducer and store (a manifest's recipe is read
    on every open). ``None`` for no recipe.

    Raises
    ------
    ConfigError
        A malformed recipe string.
    """
    if text is None:
        return None
    return _check_rescore(_stages_and_options(text)[1].get("rescore"), f"Recipe {text!r}")


def _stages_and_options(text: str) -> tuple[list[str], dict[str, str]]:
    """A recipe string's stages and its ``key=value`` options (checked, not yet typed)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"Empty recipe {text!r}: expected REDUCER|STORE[|rescore=R], "
                          "e.g. pca:192|faiss:HNSW32,SQ8|rescore=4.")
    stages = [s.strip() for s in text.split("|")]
    if len(stages) < 2 or not stages[0] or not stages[1]:
        raise ConfigError(f"Recipe {text!r}: expected at least a reducer and a store separated by '|', "
                          "e.g. pca:96|hnsw or none|faiss:HNSW32,SQ8|rescore=2.")
    options: dict[str, str] = {}
    for stage in stages[2:]:
        for part in filter(None, (p.strip() for p in stage.split(","))):
            key, eq, value = part.partition("=")
            key = key.strip().lower()
            if not eq or key not in _OPTIONS:
                raise ConfigError(f"Recipe {text!r}: option {part!r} is not one of "
                                  f"{', '.join(k + '=...' for k in _OPTIONS)}.")
            if key in options:
                raise ConfigError(f"Recipe {text!r}: option {key!r} given twice.")
            options[key] = value.strip()
    return stages, options


def save_recipe(path: str | os.PathLike[str], recipe: Recipe) -> Path:
    """Write ``recipe`` as JSON (atomically) to ``path``; returns the path."""
    from slimvec.persistence import write_json_atomic

    path = Path(path)
    write_json_atomic(path, recipe.to_json())
    return path


def load_recipe(path: str | os.PathLike[str]) -> Recipe:
    """Read a recipe JSON file (``tuned.json``).

    Raises
    ------
    PersistenceError
        The file cannot be read.
    ConfigError
        Not JSON, or not a valid recipe (the message names the file).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PersistenceError(f"Cannot read recipe file {path}: {exc}.") from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); a recipe file is written by slimvec tune.") from exc
    return Recipe.from_json(data, where=str(path))


def resolve_recipe(value: str | os.PathLike[str]) -> Recipe:
    """``--recipe`` argument: a JSON file (``tuned.json``) or a recipe string."""
    text = str(value)
    if text.lower().endswith(".json") or ("|" not in text and Path(text).is_file()):
        return load_recipe(text)
    return parse_recipe(text)


def merge_recipe(value: str | os.PathLike[str] | Recipe, reducer: str | None = None,
                 store: str | None = None, keep_full: str | None = None,
                 option: str = "--recipe") -> Recipe:
    """``--recipe`` together with ``--reducer`` / ``--store`` / ``--keep-full``: one recipe.

    A separate option that says the same as the recipe is accepted; one that disagrees is
    refused. ``keep_full`` given when the recipe keeps no full vectors is added to it.

    Raises
    ------
    ConfigError
        A separate option disagrees with the recipe (the message names both).
    """
    from slimvec.connectors import canonical_store_spec
    from slimvec.reducers import make_reducer

    recipe = value if isinstance(value, Recipe) else resolve_recipe(value)
    clashes = []
    if reducer is not None:
        asked = "none" if reducer.strip().lower() == "none" else make_reducer(reducer).spec
        if asked != recipe.reducer:
            clashes.append(f"--reducer {reducer!r} (the recipe says {recipe.reducer!r})")
    if store is not None and canonical_store_spec(store) != recipe.store:
        clashes.append(f"--store {store!r} (the recipe says {recipe.store!r})")
    if keep_full is not None and recipe.keep_full not in (None, keep_full):
        clashes.append(f"--keep-full {keep_full!r} (the recipe says keep_full={recipe.keep_full})")
    if clashes:
        raise ConfigError(f"{option} {recipe} disagrees with {'; '.join(clashes)}. Give the recipe "
                          "alone, or drop it and give --reducer / --store / --keep-full.")
    if keep_full is not None and recipe.keep_full is None:
        recipe = replace(recipe, keep_full=keep_full)
    return recipe


#: what a new index gets when ``slimvec ingest`` / ``migrate`` name no reducer, store, full vectors
#: or recipe (issue 17 item 6). Rescoring from disk costs no RAM, so on every measured size a
#: rescored configuration gives more recall per RAM byte than its unrescored twin (at 100k
#: synthetic vectors PCA-96 alone finds 0.56 of the true top 10, with k x 16 candidates re-ranked
#: 0.98; docs/benchmarks/scale.md); the depth is calibrated on the corpus for recall@10 >= 0.99
#: because the depth needed grows with N. Full vectors are kept as float16 (a side file, half the
#: disk of float32; recall@10 0.9788 against 0.9790 with float32 in docs/benchmarks/rescore.md),
#: which is also what lets a Qdrant store be calibrated.
DEFAULT_RECIPE = default_recipe("cosine")  # "none|faiss:HNSW16,SQ4,ef=128,efc=200|rescore=auto,keep_full=float16"


def apply_default_recipe(opts: Any, existing: Any, metric: str = "cosine") -> Any:
    """``opts`` with their ``default_recipe`` (:data:`DEFAULT_RECIPE`, or for another ``metric``
    :func:`slimvec.buildspec.default_recipe`, unless the caller chose another, e.g.
    ``slimvec serve --recipe``; None: no default) when they create a new index
    (``existing`` is None) and name none of ``recipe``, ``reducer``, ``store`` or ``keep_full``;
    else ``opts`` as given (an existing index keeps what it was built with). ``recipe="none"``
    (``--recipe none``) means no recipe: the separate options alone, no default, no rescoring."""
    given = getattr(opts, "recipe", None)
    if isinstance(given, str) and given.strip().lower() == "none":  # --recipe none: no recipe
        return replace(opts, recipe=None)
    if existing is not None:
        return opts
    default = getattr(opts, "default_recipe", default_recipe(metric))
    named = [getattr(opts, key, None) for key in ("recipe", "reducer", "store", "keep_full")]
    chosen = recipe_or_default(named[0], named[1], named[2], named[3], default)
    return opts if chosen is named[0] else replace(opts, recipe=chosen)


def recipe_or_default(recipe: Any, reducer: str | None, store: str | None,
                      keep_full: str | None, default: str | None) -> Any:
    """The one rule "use the default recipe when nothing was named": ``recipe`` when given,
    else ``default`` when none of ``reducer``, ``store``, ``keep_full`` is named either, else
    None (the separate options alone). Used by :func:`apply_default_recipe` (ingest, migrate,
    the Ray engine) and the service's create request."""
    if recipe is not None or any(v is not None for v in (reducer, store, keep_full)):
        return recipe
    return default


#: the rescoring depths ``slimvec bench --recipe ...|rescore=auto`` measures (a fixed grid: the
#: benchmark reports recall per depth where an index calibrates one)
AUTO_LADDER = (2, 4, 8, 16, 32)


def recipe_grid(recipes: list[str], reducers: list[str], stores: list[str], rescore: list[int]
                ) -> tuple[list[str], list[str], list[int]]:
    """``slimvec bench`` lists extended by ``--recipe`` values: each recipe's reducer, store and
    rescoring depth (``auto``: :data:`AUTO_LADDER`) join the grid, each once.

    Raises
    ------
    ConfigError
        A recipe that does not parse (the message names the stage).
    """
    reducers, stores, rescore = list(reducers), list(stores), list(rescore)
    for value in recipes:
        rec = resolve_recipe(value)
        depths = list(AUTO_LADDER) if rec.rescore == "auto" else [rec.rescore] if rec.rescore else []
        for items, new in ((reducers, [rec.reducer]), (stores, [rec.store]), (rescore, depths)):
            items.extend(x for x in new if x not in items)
    return reducers, stores, rescore


def apply_recipe(opts: Any) -> Any:
    """Options with a ``recipe`` field (ingest, migrate) with the recipe expanded into
    ``reducer``, ``store`` and ``keep_full`` and made canonical (:func:`merge_recipe`)."""
    if getattr(opts, "recipe", None) is None:
        return opts
    rec = merge_recipe(opts.recipe, opts.reducer, opts.store, opts.keep_full)
    return replace(opts, reducer=rec.reducer, store=rec.store, keep_full=rec.keep_full,
                   recipe=str(rec))
