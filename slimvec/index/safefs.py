"""Opening files inside an index folder without following symbolic links.

An index folder may come from elsewhere (a download, a shared disk). A link planted in it
(``.lock`` -> ``~/.bashrc``, ``rejects.jsonl`` -> ``/etc/...``) must never make slimvec read,
truncate or append to a file outside the index, so every file slimvec opens there by name is
opened with ``O_NOFOLLOW`` (or checked with ``lstat`` when a library opens it), and a link is
refused with a :class:`~slimvec.errors.PersistenceError` that names it.
"""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from slimvec.errors import PersistenceError

__all__ = ["open_nofollow", "open_append_text", "read_bytes_nofollow", "read_text_nofollow", "refuse_link",
           "LinkError", "append_lines_durable", "read_jsonl_nofollow"]


class LinkError(PersistenceError):
    """A file of the index folder is a symbolic link."""


def _link_error(path: Path) -> LinkError:
    return LinkError(
        f"{path} is a symbolic link. slimvec never follows links inside an index folder (it could "
        "make it write outside the index); replace the link with a regular file or remove it.")


def refuse_link(path: str | os.PathLike[str]) -> None:
    """Raise :class:`LinkError` when ``path`` exists as a symbolic link."""
    if os.path.islink(path):
        raise _link_error(Path(path))


def open_nofollow(path: str | os.PathLike[str], flags: int, mode: int = 0o644) -> int:
    """``os.open`` with ``O_NOFOLLOW``; a link gives :class:`LinkError`."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link_error(Path(path)) from None
        raise


def open_append_text(path: str | os.PathLike[str]) -> IO[str]:
    """Open a text file for appending (created if missing) without following links."""
    fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    return os.fdopen(fd, "a", encoding="utf-8")


def read_bytes_nofollow(path: str | os.PathLike[str], hint: str = "") -> bytes:
    """Read a file without following links (:class:`LinkError` for a link; ``hint`` is appended
    to the :class:`PersistenceError` of a missing or unreadable file)."""
    try:
        fd = open_nofollow(path, os.O_RDONLY)
    except LinkError:
        raise
    except OSError as exc:
        raise PersistenceError(f"Cannot read {path}: {exc.strerror or exc}. {hint}".rstrip()) from exc
    with os.fdopen(fd, "rb") as fh:
        return fh.read()


def read_text_nofollow(path: str | os.PathLike[str]) -> str:
    """Read a UTF-8 text file without following links."""
    data = read_bytes_nofollow(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PersistenceError(f"{path} is not UTF-8 text ({exc}).") from exc


def append_lines_durable(path: str | os.PathLike[str], lines: Sequence[str]) -> None:
    """Append whole lines (a journal: ``rejects.jsonl``, a pending index's ``pending.jsonl``)
    and fsync before returning, without following a link; no lines, no write."""
    if not lines:
        return
    with open_append_text(path) as fh:
        fh.write("".join(x + "\n" for x in lines))
        fh.flush()
        os.fsync(fh.fileno())


def read_jsonl_nofollow(path: str | os.PathLike[str]) -> list[Any]:
    """The values of a JSON-lines file written by :func:`append_lines_durable`, in order (blank
    lines skipped; a missing file has none), read without following a link."""
    if not os.path.lexists(path):
        return []
    return [json.loads(x) for x in read_text_nofollow(path).splitlines() if x.strip()]
