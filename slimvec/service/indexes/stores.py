"""Which stores a request may name: one inside the index folder, or a location the operator allowed.

A store spec with a location (``qdrant:http://host:6333``, ``qdrant-edge:/some/path``) makes the
server connect there (sending ``$QDRANT_API_KEY``) or write there. Over HTTP that is only allowed
for the locations given on the command line (``slimvec serve --allow-store SPEC``, repeatable):
a location is allowed when the store name is the same and the location is the allowed one or
lies under it (URLs: same scheme, host and port, path under the allowed path; folders: resolved
path under the allowed folder). Everything here is decided from the spec text alone, before any
store is built, so a refused request never connects anywhere.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from slimvec.errors import ConfigError, SlimvecError

__all__ = ["StoreNotAllowed", "external_location", "check_allow_entry", "store_allowed",
           "check_store_allowed"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


class StoreNotAllowed(SlimvecError, PermissionError):
    """A request named a store location the operator did not allow (403)."""


def external_location(spec: str) -> tuple[str, str] | None:
    """``(store name, location)`` when ``spec`` keeps its data outside the index folder, else None.

    Raises
    ------
    ConfigError
        Unknown store or unparsable spec.
    """
    from slimvec.connectors import parse_store_spec, store_class

    parsed = parse_store_spec(spec)
    if store_class(parsed).spec_arg != "location" or not parsed.arg:
        return None
    return parsed.name.lower(), str(parsed.arg).strip()


def check_allow_entry(entry: str) -> str:
    """Validate one ``--allow-store`` value (a store spec with a location); returns it stripped."""
    try:
        loc = external_location(entry)
    except SlimvecError as exc:
        raise ConfigError(f"--allow-store {entry!r}: {exc}") from exc
    if loc is None:
        raise ConfigError(f"--allow-store {entry!r} names no location: give a store with the "
                          "location to allow, e.g. --allow-store qdrant:http://qdrant:6333 or "
                          "--allow-store qdrant-edge:/srv/stores.")
    return entry.strip()


def _url_under(url: str, allowed: str) -> bool:
    if not url.startswith(("http://", "https://")):  # what the Qdrant store takes for a URL
        return False
    try:
        a, b = urlsplit(allowed), urlsplit(url)
        a_port = a.port or _DEFAULT_PORTS.get(a.scheme.lower())
        b_port = b.port or _DEFAULT_PORTS.get(b.scheme.lower())
    except ValueError:
        return False
    if (a.scheme.lower(), (a.hostname or "").lower(), a_port) != \
            (b.scheme.lower(), (b.hostname or "").lower(), b_port):
        return False
    base = posixpath.normpath("/" + a.path).rstrip("/")
    path = posixpath.normpath("/" + b.path)
    return path == (base or "/") or path.startswith(base + "/")


def _path_under(location: str, allowed: str) -> bool:
    if location == allowed:
        return True
    if location.startswith(":") or allowed.startswith(":"):  # ':memory:'
        return False
    try:
        real = Path(os.path.abspath(location)).resolve()
        base = Path(os.path.abspath(allowed)).resolve()
    except (ValueError, OSError):  # a NUL byte, a loop of links: not a location we allowed
        return False
    return real == base or real.is_relative_to(base)


def store_allowed(spec: str, allowed: Iterable[str]) -> bool:
    """True when ``spec`` keeps its data in the index folder or at a location ``allowed`` covers."""
    loc = external_location(spec)
    if loc is None:
        return True
    name, location = loc
    for entry in allowed:
        a = external_location(entry)
        if a is None or a[0] != name:
            continue
        if "://" in a[1] or "://" in location:
            if "://" in a[1] and "://" in location and _url_under(location, a[1]):
                return True
        elif _path_under(location, a[1]):
            return True
    return False


def check_store_allowed(spec: str, allowed: Iterable[str]) -> None:
    """Raise :class:`StoreNotAllowed` when a request's store spec names a location outside the
    index folder that the operator did not allow (nothing is connected to or created)."""
    allowed = list(allowed)
    if store_allowed(spec, allowed):
        return
    name, location = external_location(spec) or ("", "")
    known = (f" Allowed now: {', '.join(allowed)}." if allowed
             else " This server allows none.")
    raise StoreNotAllowed(
        f"Store {spec!r} keeps its data outside the index folder (at {location}); over HTTP a "
        f"store must live in its index folder (name it without a location, e.g. {name!r}) or at "
        f"a location the operator allowed with 'slimvec serve --allow-store {name}:LOCATION'."
        + known)
