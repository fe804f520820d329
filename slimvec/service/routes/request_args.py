"""Request helpers the routers share (issue 35: routers are siblings and import none of each
other; what two of them need lives here, below them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from slimvec.errors import ConfigError
from slimvec.service.indexes.names import check_name
from slimvec.service.limits import check_batch
from slimvec.service.models import JobIn
from slimvec.service.state import ServiceState

__all__ = ["job_options", "queries", "regular"]


def regular(rows: list[list[float]]) -> bool:
    """All rows non-empty and of one length (a matrix)."""
    return len({len(r) for r in rows}) <= 1 and all(len(r) for r in rows)


def queries(st: ServiceState, served: Any, texts: list[str] | None,
            vectors: list[list[float]] | None) -> np.ndarray:
    """Full query vectors of a request's ``texts`` (encoded) or ``vectors`` (exactly one)."""
    if (texts is None) == (vectors is None):
        raise ConfigError("Send exactly one of 'texts' or 'vectors'.")
    n = len(texts) if texts is not None else len(vectors or [])
    check_batch(n, st.config.max_batch, "queries")
    if n == 0:
        raise ConfigError("No query: 'texts' / 'vectors' is empty.")
    if vectors is not None and not regular(vectors):
        raise ConfigError("Query vectors must all have the same dimension.")
    return served.embed(texts, vectors)


def job_options(st: ServiceState, name: str, body: JobIn, **extra: Any) -> dict[str, Any]:
    """A job request's ingest options, the fields of :class:`~slimvec.indexer.pipeline.IngestOptions`
    (checked name, store and recipe; ``extra``: e.g. sync)."""
    check_name(name)
    st.registry.check_store(body.store)
    recipe = None
    if body.recipe is not None:
        from slimvec.recipe import merge_recipe, parse_recipe

        # a recipe over HTTP is a string, never a file on the server's disk
        recipe = str(parse_recipe(body.recipe))
        st.registry.check_store(merge_recipe(recipe, body.reducer, body.store,
                                             option="recipe").store)
    return dict(reducer=body.reducer, store=body.store, encoder=body.encoder, recipe=recipe, default_recipe=st.config.recipe,
                text_column=body.text_column, id_column=body.id_column, format=body.format,
                fit_sample=body.fit_sample, batch_size=body.batch_size, progress=False, **extra)
