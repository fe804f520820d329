"""Request and response bodies (pydantic); they mirror the library's types."""

from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CreateIndex", "DocumentIn", "DocumentsIn", "VectorIn", "VectorsIn", "SearchIn",
           "ReduceIn", "JobIn", "WriteOut", "SearchOut", "Hit"]

Id = Union[int, str]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateIndex(_Strict):
    """``PUT /indexes/{name}``: specs as in ``slimvec ingest``; the reducer is fitted on
    ``sample_vectors`` / ``sample_texts`` when given, else once ``fit_after`` documents arrived.
    A request naming none of ``recipe``, ``reducer``, ``store``, ``keep_full`` gets the
    service's default recipe (``slimvec serve --recipe``); with a reducer or store alone the
    other defaults to the default reducer / store (:data:`slimvec.buildspec.DEFAULTS`)."""

    recipe: Optional[str] = Field(None, max_length=500,
                                  description="REDUCER|STORE[|rescore=R|auto,...] (docs/recipes.md)")
    reducer: Optional[str] = Field(None, max_length=200)
    store: Optional[str] = Field(None, max_length=200)
    encoder: Optional[str] = Field("minilm", max_length=500)
    doc_prefix: Optional[str] = Field(None, max_length=500, description="put before every "
                                      "document before it is encoded (E5: 'passage: ')")
    query_prefix: Optional[str] = Field(None, max_length=500, description="put before every "
                                        "query before it is encoded (E5: 'query: ', BGE: an instruction)")
    keep_full: Optional[str] = Field(None, max_length=20)
    metric: Optional[str] = Field(None, max_length=10, description="cosine (default), ip or l2 "
                                  "(as slimvec migrate --metric); the reducer none then keeps it")
    fit_after: int = Field(1000, ge=1, le=10_000_000)
    sample_vectors: Optional[list[list[float]]] = None
    sample_texts: Optional[list[str]] = None
    payload_index: Optional[list[str]] = Field(
        None, max_length=100, description="FIELD:keyword|integer|float|bool payload fields to "
        "index (as slimvec ingest --payload-index); built when the reducer is fitted")


class DocumentIn(BaseModel):
    """One document; ``id`` defaults to a hash of the text (as the CLI does)."""

    id: Optional[Id] = None
    text: Optional[str] = None
    payload: Optional[dict[str, Any]] = None


class DocumentsIn(_Strict):
    documents: list[DocumentIn]


class VectorIn(BaseModel):
    """One full (encoder-dimension) vector with its id (the drop-in path of ``migrate``)."""

    id: Id
    vector: list[Optional[float]]
    payload: Optional[dict[str, Any]] = None


class VectorsIn(_Strict):
    vectors: list[VectorIn]


class SearchIn(_Strict):
    """Texts (encoded with the index's encoder) or full vectors."""

    texts: Optional[list[str]] = None
    vectors: Optional[list[list[float]]] = None
    k: int = Field(10, ge=1, le=1000)
    rescore: Optional[int] = Field(None, ge=1, le=1000)
    payloads: bool = True
    #: Qdrant's filter JSON subset (slimvec.filters); has_id takes the user's ids
    filter: Optional[dict[str, Any]] = None


class ReduceIn(_Strict):
    texts: Optional[list[str]] = None
    vectors: Optional[list[list[float]]] = None


class CalibrateIn(_Strict):
    """``POST /indexes/{name}/calibrate``: real queries (texts or full vectors) to measure the
    ``rescore=auto`` depth on; they are kept for the index's later calibrations."""

    texts: Optional[list[str]] = None
    vectors: Optional[list[list[float]]] = None


class JobIn(_Strict):
    """Ingest a file on the server (under an allowed folder), as ``slimvec ingest`` does."""

    path: str = Field(..., max_length=4096)
    text_column: str = Field("text", max_length=200)
    id_column: Optional[str] = Field(None, max_length=200)
    format: Optional[str] = Field(None, max_length=20)
    recipe: Optional[str] = Field(None, max_length=500,
                                  description="REDUCER|STORE[|rescore=R|auto,...]; a new index "
                                              "naming no recipe, reducer or store gets the "
                                              "service's default recipe")
    reducer: Optional[str] = Field(None, max_length=200)
    store: Optional[str] = Field(None, max_length=200)
    encoder: Optional[str] = Field(None, max_length=500)
    fit_sample: int = Field(10_000, ge=1, le=10_000_000)
    batch_size: int = Field(256, ge=1, le=100_000)


class WriteOut(BaseModel):
    accepted: int
    rejected: list[dict[str, Any]]
    warnings: list[dict[str, Any]] = []
    committed: bool
    pending_fit: bool = False


class Hit(BaseModel):
    id: int
    score: float
    source_id: Optional[Id] = None
    text: Optional[str] = None
    payload: Optional[dict[str, Any]] = None


class SearchOut(BaseModel):
    """``ids`` / ``scores`` as ``slimvec.open(DIR).search`` returns them (padded with -1 /
    null), and the hits with payloads."""

    ids: list[list[int]]
    scores: list[list[Optional[float]]]
    hits: list[list[Hit]]
