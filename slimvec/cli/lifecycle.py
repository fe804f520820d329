"""``slimvec delete``, ``update``, ``get``, ``scroll`` and ``compact``: an index's documents after
the first ingest (issue 25 items 1-3). Each calls a :class:`slimvec.Index` method; ids are the
ids given at ingest, filters are Qdrant filter JSON (:mod:`slimvec.filters`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from slimvec.errors import ConfigError

__all__ = ["delete", "update", "get", "scroll", "compact", "read_filter", "read_ids"]

_IDS_HELP = ("File of document ids (the ids given at ingest): one per line, or a JSON list "
             "(.json).")
_FILTER_HELP = ("Qdrant filter JSON on the payloads (must / should / must_not; match value / any "
                "/ except; range; is_null; is_empty; has_id), or @FILE to read it from a file.")


def read_filter(text: str | None) -> Any:
    """The ``--filter`` option: JSON text, or ``@FILE``; parsed (errors name the option)."""
    from slimvec.filters import parse_filter

    if text is None:
        return None
    where = "--filter"
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"--filter {path}: cannot read the file ({exc.strerror or exc}).") from exc
        where = f"--filter file {path}"
    return parse_filter(text, where=where)


def read_ids(path: Path) -> list[Any]:
    """The ``--ids FILE`` option: one id per line (blank lines skipped), or a JSON list."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"--ids {path}: cannot read the file ({exc.strerror or exc}).") from exc
    if str(path).endswith(".json"):
        try:
            ids = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"--ids {path}: not valid JSON ({exc.msg}, line {exc.lineno}); give a "
                              'list such as ["doc-1", 17].') from exc
        if not isinstance(ids, list) or not all(isinstance(i, (str, int)) and not isinstance(i, bool)
                                                for i in ids):
            raise ConfigError(f"--ids {path}: expected a JSON list of ids (strings or integers).")
        return ids
    return [line.strip() for line in text.splitlines() if line.strip()]


def _target(ids: Path | None, filter_json: str | None) -> dict[str, Any]:
    if (ids is None) == (filter_json is None):
        raise ConfigError("Give exactly one of --ids FILE or --filter JSON.")
    return {"ids": read_ids(ids)} if ids is not None else {"filter": read_filter(filter_json)}


def delete(
    index: Path = typer.Option(..., "--index", help="Index folder."),
    ids: Path | None = typer.Option(None, "--ids", help=_IDS_HELP),
    filter_json: str | None = typer.Option(None, "--filter", help=_FILTER_HELP),
) -> None:
    """Delete documents by id or by filter; prints {"deleted": N, "count": remaining}."""
    from slimvec.index.folder import open_index

    target = _target(ids, filter_json)
    with open_index(index) as idx:
        n = idx.delete(**target)
        typer.echo(json.dumps({"deleted": n, "count": idx.count()}))


def update(
    index: Path = typer.Option(..., "--index", help="Index folder."),
    set_json: str = typer.Option(..., "--set", help='Payload fields to set, as a JSON object ({"lang": "en"}).'),
    ids: Path | None = typer.Option(None, "--ids", help=_IDS_HELP),
    filter_json: str | None = typer.Option(None, "--filter", help=_FILTER_HELP),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace each payload by --set instead of merging (text and source_id go too)."),
) -> None:
    """Set payload fields by id or filter, without re-encoding; prints {"updated": N}."""
    from slimvec.index.folder import open_index
    from slimvec.index.lifecycle import set_fields_check

    target = _target(ids, filter_json)
    try:
        fields = set_fields_check(set_json)
    except ConfigError as exc:
        raise ConfigError(f"--set: {exc}") from exc
    with open_index(index) as idx:
        typer.echo(json.dumps({"updated": idx.set_payload(fields, overwrite=overwrite, **target)}))


def get(
    index: Path = typer.Option(..., "--index", help="Index folder."),
    ids: Path = typer.Option(..., "--ids", help=_IDS_HELP),
) -> None:
    """Print the records of documents by id, one JSON line each, in the order given; an unknown or
    deleted id prints {"id": ID, "found": false}."""
    from slimvec.index.folder import open_index

    wanted = read_ids(ids)
    with open_index(index) as idx:
        for want, rec in zip(wanted, idx.get(wanted)):
            typer.echo(json.dumps(rec if rec is not None else {"id": want, "found": False},
                                  ensure_ascii=False))


def scroll(
    index: Path = typer.Option(..., "--index", help="Index folder."),
    limit: int = typer.Option(100, "--limit", help="Records per page."),
    offset: int | None = typer.Option(None, "--offset", help="The next_offset printed by the previous page."),
    filter_json: str | None = typer.Option(None, "--filter", help=_FILTER_HELP),
) -> None:
    """Print one page of records as JSON: {"records": [...], "next_offset": N or null}."""
    from slimvec.index.folder import open_index

    with open_index(index) as idx:
        page, nxt = idx.scroll(limit=limit, offset=offset, filter=read_filter(filter_json))
    typer.echo(json.dumps({"records": page, "next_offset": nxt}, ensure_ascii=False))


def compact(
    index: Path = typer.Option(..., "--index", help="Index folder."),
    max_tombstones: float | None = typer.Option(None, "--max-tombstones", help="Compact only when dead full-vector rows exceed this share of the live ones (every delete already does it past 0.2) [default: always]."),
) -> None:
    """Rewrite the full vectors kept for rescoring without deleted or replaced rows, beside the
    old ones, and swap them in atomically; a store that keeps deleted positions (FAISS, as in the
    default recipe, and hnswlib) is rebuilt from them with the index's own recipe. Prints
    {"compacted": bool, "dropped": rows, "store_rebuilt": bool, ...}."""
    from slimvec.ops.compact import compact_index

    if max_tombstones is not None and not 0 <= max_tombstones:
        raise ConfigError(f"--max-tombstones must be 0 or more (a share, e.g. 0.2), got {max_tombstones}.")
    typer.echo(json.dumps(compact_index(index, max_tombstones)))
