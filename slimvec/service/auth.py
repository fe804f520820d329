"""API keys: ``Authorization: Bearer KEY`` or ``api-key: KEY``; a read-only key may not write."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

__all__ = ["Auth"]


class Auth:
    """Checks a request's key against the configured read-write and read-only keys."""

    def __init__(self, api_key: str | None, read_only_key: str | None) -> None:
        self.api_key, self.read_only_key = api_key, read_only_key

    @staticmethod
    def _given(request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            return header[7:].strip()
        return request.headers.get("api-key")

    def level(self, request: Request) -> str:
        """``write``, ``read``, or raise 401."""
        if not self.api_key:
            return "write"
        given = self._given(request)
        if given and hmac.compare_digest(given.encode(), self.api_key.encode()):
            return "write"
        if given and self.read_only_key and hmac.compare_digest(given.encode(),
                                                                self.read_only_key.encode()):
            return "read"
        raise HTTPException(401, "Missing or wrong API key: send 'Authorization: Bearer KEY' or "
                                 "'api-key: KEY'.", headers={"WWW-Authenticate": "Bearer"})

    def read(self, request: Request) -> None:
        """Dependency: any valid key."""
        self.level(request)

    def write(self, request: Request) -> None:
        """Dependency: the read-write key."""
        if self.level(request) != "write":
            raise HTTPException(403, "This key is read-only: it may search and read, not write.")
