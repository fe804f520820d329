"""Qdrant's collection aliases: ``POST /collections/aliases`` (create, delete, rename; all or
nothing), ``GET /aliases``, ``GET /collections/NAME/aliases``.

An alias is another name of one collection, resolved in every collection route (reads and writes;
not by create, delete or the alias listing of a collection, as in Qdrant). The table is kept in
``ROOT/.qdrant/.aliases.json`` (written atomically; a leading dot: never a collection's settings
file, whose name starts with a letter or digit), so it survives a restart. Deleting a collection
drops its aliases.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from slimvec.service.qdrant_api.models import QdrantError, check_fields

__all__ = ["Aliases", "ALIASES_FILE"]

ALIASES_FILE = ".aliases.json"
#: the longest alias name taken (Qdrant's collection names are at most 255 characters)
MAX_ALIAS = 255


class Aliases:
    """The alias table of a served root's Qdrant collections.

    Parameters
    ----------
    folder : Path
        ``ROOT/.qdrant``; the table is its ``.aliases.json``.
    """

    def __init__(self, folder: Path) -> None:
        from slimvec.persistence import read_json

        self.path = folder / ALIASES_FILE
        self.lock = threading.Lock()
        self.table: dict[str, str] = dict(read_json(self.path)) if self.path.is_file() else {}

    def resolve(self, name: str) -> str:
        """The collection that ``name`` names (``name`` itself when it is no alias)."""
        return self.table.get(name, name)

    def listing(self, collection: str | None = None) -> dict[str, Any]:
        """``{"aliases": [{"alias_name", "collection_name"}, ...]}``, of one collection or all."""
        return {"aliases": [{"alias_name": a, "collection_name": c} for a, c in self.table.items()
                            if collection is None or c == collection]}

    def refuse_collection_name(self, name: str) -> None:
        """Refuse a new collection named as an existing alias (as Qdrant does)."""
        if name in self.table:
            raise QdrantError(400, f"Wrong input: Can't create collection with name {name}. "
                                   "Alias with the same name already exists")

    def drop(self, collection: str) -> None:
        """Drop every alias of ``collection`` (it was deleted)."""
        with self.lock:
            if collection in self.table.values():
                self._commit({a: c for a, c in self.table.items() if c != collection})

    def apply(self, body: dict[str, Any], collections: Callable[[], Iterable[str]]) -> bool:
        """``POST /collections/aliases``: every action checked and applied to a copy, then the
        copy written and taken; one bad action refuses them all and changes nothing."""
        check_fields(body, ("actions",), "update aliases")
        actions = body.get("actions")
        if not isinstance(actions, list):
            raise QdrantError(400, "Bad request: send {\"actions\": [{\"create_alias\": {...}}, "
                                   "{\"delete_alias\": {...}}, {\"rename_alias\": {...}}, ...]}, "
                                   f"got {type(actions).__name__}.")
        with self.lock:
            names, table = set(collections()), dict(self.table)
            for i, action in enumerate(actions):
                _one(table, names, action, i)
            self._commit(table)
        return True

    def _commit(self, table: dict[str, str]) -> None:
        from slimvec.persistence import write_json_atomic

        self.path.parent.mkdir(exist_ok=True)
        write_json_atomic(self.path, table)  # written first: a failed write changes nothing
        self.table = table


#: each action's fields
_ACTIONS = {"create_alias": ("collection_name", "alias_name"), "delete_alias": ("alias_name",),
            "rename_alias": ("old_alias_name", "new_alias_name")}


def _one(table: dict[str, str], collections: set[str], action: Any, i: int) -> None:
    """Apply action ``i`` to ``table`` (refused in Qdrant's words)."""
    if not isinstance(action, dict) or len(action) != 1 or next(iter(action)) not in _ACTIONS:
        raise QdrantError(400, f"Bad request: actions[{i}] must be an object with one key of "
                               f"{', '.join(_ACTIONS)}, got {str(action)[:80]!r}.")
    kind, args = next(iter(action.items()))
    if not isinstance(args, dict):
        raise QdrantError(400, f"Bad request: actions[{i}].{kind} must be an object.")
    check_fields(args, _ACTIONS[kind], f"actions[{i}].{kind}")
    for field in _ACTIONS[kind]:
        value = args.get(field)
        if not isinstance(value, str) or not 0 < len(value) <= MAX_ALIAS:
            raise QdrantError(400, f"Bad request: actions[{i}].{kind}.{field} must be a name of "
                                   f"1-{MAX_ALIAS} characters, got {str(value)[:80]!r}.")
    if kind == "create_alias":
        collection, alias = args["collection_name"], args["alias_name"]
        if collection not in collections:  # an alias names a collection, never another alias
            raise QdrantError(404, f"Not found: Collection `{collection}` doesn't exist!")
        _free(alias, collections)
        table[alias] = collection
    elif kind == "delete_alias":
        table.pop(args["alias_name"], None)  # as local mode: an unknown alias is no error
    else:
        old, new = args["old_alias_name"], args["new_alias_name"]
        _free(new, collections)
        if old not in table:
            raise QdrantError(404, f"Not found: Alias {old} does not exists!")
        table[new] = table.pop(old)


def _free(alias: str, collections: set[str]) -> None:
    if alias in collections:
        raise QdrantError(400, f"Wrong input: Collection `{alias}` already exists! An alias "
                               "cannot take the name of a collection; choose another alias name.")
