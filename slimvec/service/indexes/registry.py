"""The indexes a service serves: opened once, each with its writer lock, store and writer.

Every folder under the root holding ``manifest.json`` is an index, opened through an
:class:`~slimvec.indexer.builder.IndexBuilder` that holds its writer lock while the service serves
it (so a CLI ingest cannot write under it). An index created over HTTP without a fit sample lives
in ``ROOT/.pending/NAME`` (``service.json`` and its documents, fsynced, in ``pending.jsonl``) until
``fit_after`` documents have arrived; then the builder creates the index folder and the documents
are written and committed. A job suspends the index (commit, close, unlock), runs
:func:`slimvec.indexer.pipeline.ingest`, and reopens it.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

import numpy as np

from slimvec.buildspec import ENCODING_FIELDS
from slimvec.errors import ConfigError, SlimvecError
from slimvec.index.folder import Index
from slimvec.index.manifest import MANIFEST
from slimvec.indexer.keepfull import check_keep_full
from slimvec.reducers import make_reducer
from slimvec.service.indexes.encoders import Encoders
from slimvec.service.indexes.index_state import Busy, ConflictError, IndexState, NotFound, WriteResult
from slimvec.service.indexes.names import check_name, index_folder
from slimvec.service.indexes.served import ServedIndex
from slimvec.service.indexes.served_pending import PENDING, PENDING_DIR, read_pending
from slimvec.service.indexes.spec import SERVICE_SPEC, ServiceSpec

__all__ = ["Registry", "ServedIndex", "ServiceSpec", "IndexSpecIn", "IndexState", "NotFound",
           "Busy", "ConflictError", "WriteResult", "Encoders", "SERVICE_SPEC", "PENDING",
           "PENDING_DIR", "read_pending"]

log = logging.getLogger(__name__)

#: the old constructor of the creation spec (fields that already agree), kept for callers
IndexSpecIn = ServiceSpec.plain


class Registry:
    """Every index under the root, by name."""

    def __init__(self, root: Path, encoders: Encoders,
                 on_commit: Callable[[str, int, int], None] | None = None,
                 allow_stores: Sequence[str] = ()) -> None:
        self.root = root
        #: store locations outside the index folders that requests may name (--allow-store)
        self.allow_stores = list(allow_stores)
        self.encoders = encoders
        self._on_commit = on_commit or (lambda name, n, bad: None)
        self._indexes: dict[str, ServedIndex] = {}
        self._lock = threading.Lock()
        self.errors: dict[str, str] = {}

    def open_all(self, skip: AbstractSet[str] = frozenset()) -> None:
        """Open every index folder under the root (those in ``skip`` are left to their jobs)."""
        for folder in sorted(self.root.iterdir()):
            if not folder.is_dir() or folder.name.startswith(".") or folder.name in skip:
                continue
            if (folder / MANIFEST).exists():
                self._open_logged(folder)
        pending = self.root / PENDING_DIR
        for folder in sorted(pending.iterdir()) if pending.is_dir() else []:
            if folder.name not in skip and folder.name not in self._indexes:
                self._open_logged(folder)

    def _open_logged(self, folder: Path) -> None:
        """Serve the index of ``folder`` found at start-up; one that cannot be served is logged
        and listed in :attr:`errors`, the others are served regardless."""
        try:
            check_name(folder.name)
            self.open(folder.name)
        except SlimvecError as exc:
            log.error("cannot serve %s: %s", folder, exc)
            self.errors[folder.name] = str(exc)

    def open(self, name: str) -> ServedIndex:
        """Open (or reopen) index ``name``."""
        served = ServedIndex(name, self.root, self.encoders, self._on_commit, self.allow_stores)
        served.open()
        with self._lock:
            self._indexes[name] = served
        self.errors.pop(name, None)
        return served

    def fail(self, name: str, reason: str) -> None:
        """Record that index ``name`` failed (shown as ``failed`` with ``reason``), unless an
        index of that name is served."""
        with self._lock:
            if name not in self._indexes:
                self.errors[name] = reason

    def failed_info(self, name: str) -> dict[str, Any] | None:
        """What ``GET /indexes`` shows of an index that failed and is not served, else None."""
        with self._lock:
            if name in self._indexes or name not in self.errors:
                return None
            return {"name": name, "state": IndexState.FAILED, "error": self.errors[name]}

    def get(self, name: str) -> ServedIndex:
        """The served index ``name`` or :class:`NotFound`."""
        check_name(name)
        with self._lock:
            served = self._indexes.get(name)
        if served is None:
            raise NotFound(f"No index named {name!r} under the served root"
                           + (f" (it failed to open: {self.errors[name]})" if name in self.errors
                              else "") + ". List them with GET /indexes.")
        return served

    def check_store(self, spec: str | None) -> None:
        """Refuse (403) a requested store outside the index folder unless the operator allowed
        its location; see :mod:`slimvec.service.indexes.stores`."""
        from slimvec.service.indexes.stores import check_store_allowed

        if spec:
            check_store_allowed(spec, self.allow_stores)

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._indexes)

    def create(self, name: str, spec: ServiceSpec, sample: np.ndarray | None = None,
               sample_texts: list[str] | None = None) -> tuple[ServedIndex, bool]:
        """Create index ``name``; returns it and whether it is new (409 on other specs)."""
        from slimvec.connectors import canonical_store_spec, store_dim_problem
        from slimvec.encoder import resolve_model

        folder = index_folder(self.root, name)
        self.check_store(spec.store)  # before anything could connect to or write at it
        n_out = getattr(make_reducer(spec.reducer), "n_components", None)
        store_spec = canonical_store_spec(spec.store)
        if isinstance(n_out, int) and (problem := store_dim_problem(store_spec, n_out)):
            raise ConfigError(f"{problem}. Choose a reducer size and a store spec that fit together.")
        check_keep_full(spec.keep_full)
        if spec.encoder:
            resolve_model(spec.encoder)
        with self._lock:
            existing = self._indexes.get(name)
            if existing is None and (folder.exists() or (self.root / PENDING_DIR / name).exists()):
                raise Busy(f"{name!r} exists under the root but is not served (a job, or a folder "
                           "that is not an index); choose another name.")
            if existing is None:
                placeholder = ServedIndex(name, self.root, self.encoders, self._on_commit, self.allow_stores)
                placeholder.state = IndexState.BUSY
                placeholder.busy_reason = "its creation"
                self._indexes[name] = placeholder
        if existing is not None:
            info = existing.info()
            same = (info.get("store") == store_spec and info.get("encoder") == spec.encoder
                    and str(info.get("reducer")) in (spec.reducer, make_reducer(spec.reducer).spec)
                    and info.get("recipe") == spec.recipe
                    and (info.get("metric") or "cosine") == (spec.build.metric or "cosine")
                    and {k: info[k] for k in ENCODING_FIELDS if k in info} == spec.build.encoding)
            if not same:
                raise ConflictError(f"Index {name!r} already exists with reducer {info.get('reducer')!r}, "
                                    f"store {info.get('store')!r}, encoder {info.get('encoder')!r}, "
                                    f"recipe {info.get('recipe')!r}, metric {info.get('metric') or 'cosine'!r}"
                                    + "".join(f", {k} {info[k]!r}" for k in ENCODING_FIELDS if k in info)
                                    + "; delete it first or choose another name.")
            return existing, False
        served = ServedIndex(name, self.root, self.encoders, self._on_commit, self.allow_stores)
        served.spec = spec.with_store(store_spec)
        try:
            if sample_texts:
                if not spec.encoder:
                    raise ConfigError("sample_texts needs an encoder; send sample_vectors.")
                sample = self.encoders.get(spec.build).encode(sample_texts)
            if sample is not None:
                with served.lock:
                    served.create_from_sample(sample)
            else:
                served.pending_dir.mkdir(parents=True)
                served.spec.save(served.pending_dir / SERVICE_SPEC)
                served.open()
        except BaseException:
            with self._lock:
                self._indexes.pop(name, None)
            try:
                served.close()
            finally:
                shutil.rmtree(served.pending_dir, ignore_errors=True)
                if not (folder / MANIFEST).exists():
                    shutil.rmtree(folder, ignore_errors=True)
            raise
        with self._lock:
            self._indexes[name] = served
        return served, True

    def delete(self, name: str) -> None:
        """Close index ``name`` and delete its folder (one that failed: its folder and record)."""
        check_name(name)
        if self.failed_info(name) is not None:
            shutil.rmtree(index_folder(self.root, name), ignore_errors=True)
            self.errors.pop(name, None)
            return
        served = self.get(name)
        with served.lock:
            if served.state == IndexState.BUSY:
                raise Busy(f"Index {name!r} is being written by {served.busy_reason}; delete it "
                           "when that finishes.")
            served.close()
            with self._lock:
                self._indexes.pop(name, None)
            shutil.rmtree(served.folder, ignore_errors=True)
            shutil.rmtree(served.pending_dir, ignore_errors=True)

    def suspend(self, name: str, reason: str) -> ServedIndex:
        """Close index ``name`` (committing) and mark it busy; creates a placeholder if new."""
        with self._lock:
            served = self._indexes.get(name)
            if served is None:
                served = ServedIndex(name, self.root, self.encoders, self._on_commit, self.allow_stores)
                self._indexes[name] = served
        with served.lock:
            if served.state == IndexState.BUSY:
                raise Busy(f"Index {name!r} is being written by {served.busy_reason}.")
            served.close()  # a pending index keeps its rows: they are written after the job
            served.state, served.busy_reason = IndexState.BUSY, reason
            served.reader = _job_reader(served)
        return served

    def pending_spec(self, name: str) -> dict[str, Any] | None:
        """The creation spec of index ``name`` while it collects its fit sample (``service.json``'s
        object, :meth:`ServiceSpec.to_json`), else None."""
        with self._lock:
            served = self._indexes.get(name)
        if served is None or served.state != IndexState.PENDING or served.spec is None:
            return None
        return served.spec.to_json()

    def resume(self, name: str) -> None:
        """Reopen index ``name`` after a job (drop it if the job created nothing)."""
        folder = index_folder(self.root, name)
        with self._lock:
            busy = self._indexes.get(name)
        reader = busy.reader if busy is not None else None
        if busy is not None:
            busy.reader = None
        if reader is not None:
            reader.close()  # before the writer reopens (nothing of the job's is in it)
        if (folder / MANIFEST).exists():
            try:
                self.open(name)  # replaces the busy placeholder
                return
            except Exception as exc:  # noqa: BLE001 - the job's thread must record its end
                log.exception("reopening %s after its job failed", folder)
                self.errors[name] = str(exc)
        with self._lock:
            self._indexes.pop(name, None)

    def close_all(self) -> None:
        """Commit and close every index."""
        for name in self.names():
            try:
                with self._lock:
                    served = self._indexes.get(name)
                if served is not None:
                    served.close()
            except Exception as exc:  # noqa: BLE001 - close the others anyway
                log.error("closing %s failed: %s", name, exc)


def _job_reader(served: ServedIndex) -> Index | None:
    """The index opened read-only for searches while a job writes it, or None: not fitted yet,
    or a store that takes its folder for the writer alone (Qdrant Edge, qdrant-client local
    mode: :meth:`~slimvec.connectors.base.VectorStore.needs_reader_lock`)."""
    from slimvec.connectors import store_class
    from slimvec.index.folder import open_index, read_manifest

    if not (served.folder / MANIFEST).exists():
        return None
    try:
        manifest = read_manifest(served.folder)
        if store_class(manifest.store).needs_reader_lock(manifest.store):
            return None
        return open_index(served.folder, trust_store=served._trusted_store())
    except SlimvecError as exc:  # searches then answer 409 until the job ends, as before
        log.warning("%s: no read-only view during the job (%s)", served.name, exc)
        return None

