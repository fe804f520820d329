"""Request and response bodies (pydantic); they mirror the library's types."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CreateIndex", "DocumentIn", "DocumentsIn", "VectorIn", "VectorsIn", "SearchIn",
           "ReduceIn", "JobIn", "WriteOut", "SearchOut", "Hit"]

Id = int | str


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateIndex(_Strict):
    """``PUT /indexes/{name}``: specs as in ``slimvec ingest``; the reducer is fitted on
    ``sample_vectors`` / ``sample_texts`` when given, else once ``fit_after`` documents arrived.
    A request naming none of ``recipe``, ``reducer``, ``store``, ``keep_full`` gets the
    service's default recipe (``slimvec serve --recipe``); with a reducer or store alone the
    other defaults to the default reducer / store (:data:`slimvec.buildspec.DEFAULTS`)."""

    recipe: str | None = Field(None, max_length=500,
                                  description="REDUCER|STORE[|rescore=R|auto,...] (docs/recipes.md)")
    reducer: str | None = Field(None, max_length=200)
    store: str | None = Field(None, max_length=200)
    encoder: str | None = Field("minilm", max_length=500)
    doc_prefix: str | None = Field(None, max_length=500, description="put before every "
                                      "document before it is encoded (E5: 'passage: ')")
    query_prefix: str | None = Field(None, max_length=500, description="put before every "
                                        "query before it is encoded (E5: 'query: ', BGE: an instruction)")
    keep_full: str | None = Field(None, max_length=20)
    metric: str | None = Field(None, max_length=10, description="cosine (default), ip or l2 "
                                  "(as slimvec migrate --metric); the reducer none then keeps it")
    fit_after: int = Field(1000, ge=1, le=10_000_000)
    sample_vectors: list[list[float]] | None = None
    sample_texts: list[str] | None = None
    payload_index: list[str] | None = Field(
        None, max_length=100, description="FIELD:keyword|integer|float|bool|datetime payload fields to "
        "index (as slimvec ingest --payload-index); built when the reducer is fitted")


class DocumentIn(BaseModel):
    """One document; ``id`` defaults to a hash of the text (as the CLI does)."""

    id: Id | None = None
    text: str | None = None
    payload: dict[str, Any] | None = None


class DocumentsIn(_Strict):
    documents: list[DocumentIn]


class VectorIn(BaseModel):
    """One full (encoder-dimension) vector with its id (the drop-in path of ``migrate``)."""

    id: Id
    vector: list[float | None]
    payload: dict[str, Any] | None = None


class VectorsIn(_Strict):
    vectors: list[VectorIn]


class SearchIn(_Strict):
    """Texts (encoded with the index's encoder) or full vectors."""

    texts: list[str] | None = None
    vectors: list[list[float]] | None = None
    k: int = Field(10, ge=1, le=1000)
    rescore: int | None = Field(None, ge=0, le=1000, description="Candidates k * rescore re-ranked with the kept full vectors; none: the recipe's depth; 0: no re-ranking")
    payloads: bool = True
    #: Qdrant's filter JSON subset (slimvec.filters); has_id takes the user's ids
    filter: dict[str, Any] | None = None


class ReduceIn(_Strict):
    texts: list[str] | None = None
    vectors: list[list[float]] | None = None


class CalibrateIn(_Strict):
    """``POST /indexes/{name}/calibrate``: real queries (texts or full vectors) to measure the
    ``rescore=auto`` depth on; they are kept for the index's later calibrations."""

    texts: list[str] | None = None
    vectors: list[list[float]] | None = None


class JobIn(_Strict):
    """Ingest a file on the server (under an allowed folder), as ``slimvec ingest`` does."""

    path: str = Field(..., max_length=4096)
    text_column: str = Field("text", max_length=200)
    id_column: str | None = Field(None, max_length=200)
    format: str | None = Field(None, max_length=20)
    recipe: str | None = Field(None, max_length=500,
                                  description="REDUCER|STORE[|rescore=R|auto,...]; a new index "
                                              "naming no recipe, reducer or store gets the "
                                              "service's default recipe")
    reducer: str | None = Field(None, max_length=200)
    store: str | None = Field(None, max_length=200)
    encoder: str | None = Field(None, max_length=500)
    fit_sample: int = Field(10_000, ge=1, le=10_000_000)
    batch_size: int = Field(256, ge=1, le=100_000)


class WriteOut(BaseModel):
    accepted: int
    rejected: list[dict[str, Any]]
    warnings: list[dict[str, Any]] = []
    committed: bool
    pending_fit: bool = False


class Hit(BaseModel):
    """One search hit: ``id`` is the user's id (the id given at ingest, as ``slimvec search
    --json`` and ``GET .../documents`` name it), ``store_id`` the store's integer id;
    ``source_id`` repeats ``id`` for clients written before ``id`` named it."""

    id: Id
    store_id: int
    score: float
    source_id: Id | None = None
    text: str | None = None
    payload: dict[str, Any] | None = None


class SearchOut(BaseModel):
    """``ids`` / ``scores`` as ``slimvec.open(DIR).search`` returns them (padded with -1 /
    null), and the hits with payloads."""

    ids: list[list[int]]
    scores: list[list[float | None]]
    hits: list[list[Hit]]
