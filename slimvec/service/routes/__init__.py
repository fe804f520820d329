"""The service's native HTTP routers, siblings that import none of each other; what they share
lives in :mod:`.request_args`."""
