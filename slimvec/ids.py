"""Stable 64-bit document ids: the same document always maps to the same store id.

The id rule (version 2, :data:`ID_RULE`)
----------------------------------------
1. A source id is first made *canonical*, so that every input format gives the same answer:
   an integer stays itself; a float with an integral value is that integer (``1.0`` -> ``1``);
   a string holding a plain decimal integer (``"5"``, ``"-3"``, ``"7.0"``; no leading zeros, no
   spaces) is that integer. CSV ``"5"``, JSONL ``5`` and Parquet ``5.0`` are one document.
   Anything else stays a string (``"05"``, ``"a1"``, a UUID).
2. A canonical integer in ``[0, 2**62)`` *is* the store id.
3. Every other id is hashed (BLAKE2b, 62 bits) into ``[2**62, 2**63)``, tagged by kind: a given
   string or an out-of-range integer (``s:``), or a text-derived id of a document without one
   (``t:``, see :class:`TextKey`). Given integer ids and hashed ids therefore never share a
   value, and a text-derived id never equals a given string id's store id.

Version 1 (indexes written before the rule had a version) kept integers in ``[0, 2**63)`` and
hashed everything else, including text keys, into the same space. An existing index keeps the
rule it was built with: its manifest records ``id_rule`` (missing means 1) and the writer passes
it as ``rule=``.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["doc_id", "doc_ids", "FIRST_HASHED", "text_key", "canonical_id", "user_id", "source_ids_of", "TextKey", "ID_RULE"]

ID_RULE = 2
_MASK = (1 << 63) - 1
_LOW = 1 << 62  # given integer ids live below, hashed ids at or above
#: the first store id of a hashed id (rule 2): given integers below it keep their order
FIRST_HASHED = _LOW
_INT_TEXT = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.0*)?")


class TextKey(str):
    """A source id derived from a document's text (the text has no id of its own)."""

    __slots__ = ()


def _hash63(data: bytes) -> int:
    value = int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") & _MASK
    return value or 1  # 0 is reserved-free but keep ids strictly positive for every backend


def text_key(text: str) -> TextKey:
    """Source id for a document without one: a short hex hash of its text."""
    return TextKey(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest())


def canonical_id(source_id: object) -> int | str:
    """The canonical form of a source id (rule 2, step 1): an ``int`` or a ``str``."""
    if isinstance(source_id, TextKey):
        return source_id
    if isinstance(source_id, (bool, np.bool_)):
        return str(source_id)
    if isinstance(source_id, (int, np.integer)):
        return int(source_id)
    if isinstance(source_id, (float, np.floating)):
        f = float(source_id)
        return int(f) if math.isfinite(f) and f == int(f) else repr(f)
    s = str(source_id)
    if len(s) < 40 and _INT_TEXT.fullmatch(s):
        return int(s.split(".", 1)[0])
    return s


def doc_id(source_id: str | int, rule: int = ID_RULE) -> int:
    """Store id (in [0, 2**63)) of a document given its source id.

    Parameters
    ----------
    source_id : str, int, float or TextKey
    rule : int
        Id rule version (see the module docstring); existing indexes pass the one they recorded.
    """
    if rule == 1:
        if isinstance(source_id, (int, np.integer)) and 0 <= int(source_id) <= _MASK:
            return int(source_id)
        return _hash63(str(source_id).encode("utf-8", "surrogatepass"))
    if isinstance(source_id, (int, np.integer)) and not isinstance(source_id, (bool, np.bool_)):
        value: int | str = int(source_id)
    elif isinstance(source_id, str) and not isinstance(source_id, TextKey) and not (
            source_id[:1].isdigit() or source_id[:1] == "-"):
        value = source_id  # fast path: cannot be an integer
    else:
        value = canonical_id(source_id)
    if isinstance(value, int):
        if 0 <= value < _LOW:
            return value
        data = b"s:" + str(value).encode()
    elif isinstance(value, TextKey):
        data = b"t:" + value.encode()
    else:
        data = b"s:" + value.encode("utf-8", "surrogatepass")
    return _LOW | (_hash63(data) & (_LOW - 1))


def doc_ids(source_ids: Iterable[str | int], rule: int = ID_RULE) -> np.ndarray:
    """Vectorised :func:`doc_id` as int64."""
    return np.fromiter((doc_id(s, rule) for s in source_ids), dtype=np.int64)


def user_id(store_id: int, payload: Mapping[str, Any] | None) -> int | str:
    """The user's id of a stored document: the id given at ingest, which the payload records as
    ``source_id`` (a string or an integer), else the store id (a migrated collection's payloads
    record none, and its integer ids are the store ids). The one mapping behind
    ``SearchResult.source_ids``, ``Index.get``, ``slimvec search`` and the service's hits."""
    sid = (payload or {}).get("source_id")
    if isinstance(sid, (int, str)) and not isinstance(sid, bool):
        return sid
    return int(store_id)


def source_ids_of(ids: np.ndarray, lookup: Callable[[list[int]], list[Any]] | None
                  ) -> list[list[Any]]:
    """``SearchResult.source_ids``: per query, the user's id of each hit of ``ids`` (store ids,
    ``-1`` padding), the id given at ingest (e.g. ``"D00940"``, :func:`user_id`), ``None`` in
    padded slots; aligned with ``ids`` and ``scores``. ``lookup`` maps store ids to user ids from
    the payloads, read when asked (a search alone does not pay for it), so while the index is open.

    Raises
    ------
    ConfigError
        No ``lookup``: the result of a store's own search, which knows store ids only.
    """
    if lookup is None:
        from slimvec.errors import ConfigError

        raise ConfigError("This result comes from a store's own search, which knows store ids "
                          "only; search through slimvec.open(INDEX) or slimvec.Client for the "
                          "ids given at ingest (SearchResult.source_ids).")
    wanted = list(dict.fromkeys(int(i) for i in np.asarray(ids).ravel() if i >= 0))
    found = dict(zip(wanted, lookup(wanted)))
    return [[found[int(i)] if i >= 0 else None for i in row] for row in np.asarray(ids)]
