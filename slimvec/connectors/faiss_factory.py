"""FAISS ``index_factory`` strings read without building anything: range checks of every number
(FAISS aborts the process on some), code bytes per vector, and what a factory allocates before
its first vector. Split out of :mod:`slimvec.connectors.faiss_store`, which re-exports
:func:`code_bytes` and :func:`rabitq_code_bytes`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from slimvec.connectors.options import MAX_DIM
from slimvec.errors import ConfigError

__all__ = ["FactoryShape", "RABITQ_TOKEN", "factory_shape", "code_bytes", "rabitq_code_bytes", "structure_bytes",
           "probe_dim", "MAX_LISTS", "MAX_HNSW_M", "MAX_PQ_M", "MAX_NBITS", "MAX_RABITQ_BITS",
           "MAX_STRUCTURE_BYTES", "quantization_label", "min_train_vectors", "dim_problem",
           "check_factory", "check_qb"]

#: most IVF lists a factory may ask for: 2^20 is what FAISS's own guidelines use for a billion
#: vectors; ``IVF100000000`` allocated 4.8 GB of empty lists and died in bad_alloc
MAX_LISTS = 1 << 20
#: bounds of the other numbers of a factory string
MAX_HNSW_M, MAX_PQ_M, MAX_NBITS = 512, 4096, 16
#: bits per coordinate FAISS's RaBitQ codes accept (``RaBitQ`` = 1, ``RaBitQ4``... ``RaBitQ9``)
MAX_RABITQ_BITS = 9
#: ``RaBitQ``, ``RaBitQ4``, ``RaBitQfs``, ``RaBitQfs4``, ``RaBitQfs_64`` (the fast-scan block size)
RABITQ_TOKEN = re.compile(r"RaBitQ(fs)?(\d+)?(?:_\d+)?")
#: most bytes a factory may allocate before the first vector is stored (centroids, codebooks,
#: empty lists); above it the factory is refused with advice instead of ending in bad_alloc
MAX_STRUCTURE_BYTES = 2 << 30


@dataclass
class FactoryShape:
    """The numbers of a FAISS factory string that size its allocations (see :func:`factory_shape`).

    Attributes
    ----------
    lists : list of (token, int)
        Inverted lists of each IVF / IMI coarse quantizer.
    pq : list of (token, m, nbits)
        Product (and residual) quantizers: sub-quantizers and bits per code.
    out_dims : list of int
        Output dimensions of pre-transforms (PCA, OPQ_d, RR, ITQ_d), in order.
    rabitq : list of (token, bits, fastscan)
        RaBitQ quantizers: bits per coordinate and whether it is the fast-scan variant.
    """

    lists: list[tuple[str, int]] = field(default_factory=list)
    pq: list[tuple[str, int, int]] = field(default_factory=list)
    out_dims: list[int] = field(default_factory=list)
    rabitq: list[tuple[str, int, bool]] = field(default_factory=list)

    @property
    def nlist(self) -> int:
        """Lists of the largest IVF coarse quantizer (each needs a training vector); an IMI
        trains its sub-quantizers instead (see ``pq``)."""
        return max((n for tok, n in self.lists if tok.startswith("IVF")), default=0)


def _refuse(factory: str, token: str, what: str, lo: int, hi: int, got: Any, advice: str) -> NoReturn:
    raise ConfigError(f"FAISS factory {factory!r}: {what} of {token} is out of range: expected a "
                      f"whole number from {lo} to {hi}, got {got}. {advice}")


def factory_shape(factory: str) -> FactoryShape:
    """Range-check every number of a FAISS ``index_factory`` string, without building anything.

    Checked: IVF nlist (1 to 2^20), IMI lists (at most 2^20), HNSW / NSG degree M (2 to 512: FAISS
    aborts the process on HNSW1 and crashes on HNSW0), PQ / RQ sub-quantizers m (1 to 4096) and
    bits (1 to 16), OPQ m and output dimension, PCA / RR output dimensions (1 to 65536).
    Whether the string is a factory FAISS knows, and whether PQ m divides the dimension, is
    FAISS's own answer (:meth:`FaissStore.dim_problem`).

    Raises
    ------
    ConfigError
        A number out of its range; the message names the token, the range and the value.
    """
    shape = FactoryShape()
    text = str(factory)
    for m in re.finditer(r"IVF(\d+)", text):
        n = int(m.group(1))
        if not 1 <= n <= MAX_LISTS:
            _refuse(text, m.group(0), "the number of lists (nlist)", 1, MAX_LISTS, n,
                    "Use about 4*sqrt(N) to 16*sqrt(N) lists for N vectors (IVF1024 for a million); "
                    "every list needs training vectors and memory.")
        shape.lists.append((m.group(0), n))
    for m in re.finditer(r"IMI(\d+)x(\d+)", text):
        splits, bits = int(m.group(1)), int(m.group(2))
        if splits < 1 or bits < 1 or splits * bits > 20:
            raise ConfigError(f"FAISS factory {text!r}: {m.group(0)} asks for 2^{splits * bits} lists; "
                              f"expected splits x bits of at most 20 (2^20 lists), each at least 1. "
                              "Use e.g. IMI2x8 (65,536 lists).")
        shape.lists.append((m.group(0), 2 ** (splits * bits)))
        shape.pq.append((m.group(0), splits, bits))
    for m in re.finditer(r"(?:HNSW|NSG)(\d+)", text):
        n = int(m.group(1))
        if not 2 <= n <= MAX_HNSW_M:
            _refuse(text, m.group(0), "the graph degree M", 2, MAX_HNSW_M, n,
                    "FAISS crashes below 2 (HNSW1 aborts the process); 16-64 is usual (HNSW32).")
    for m in re.finditer(r"(?<![A-Za-z])(PQ|RQ)(\d+)(?:x(\d+))?", text):
        sub, bits = int(m.group(2)), int(m.group(3) or 8)
        if not 1 <= sub <= MAX_PQ_M:
            _refuse(text, m.group(0), "the number of sub-quantizers m", 1, MAX_PQ_M, sub,
                    "m must divide the vector dimension (e.g. PQ16 for 96 or 384 dimensions).")
        if not 1 <= bits <= MAX_NBITS:
            _refuse(text, m.group(0), "the bits per code (nbits)", 1, MAX_NBITS, bits,
                    f"Each sub-quantizer trains 2^nbits centroids; 8 is the default (PQ{sub}x8), "
                    "4 the fast-scan size.")
        shape.pq.append((m.group(0), sub, bits))
    for m in re.finditer(r"OPQ(\d+)(?:_(\d+))?", text):
        sub = int(m.group(1))
        if not 1 <= sub <= MAX_PQ_M:
            _refuse(text, m.group(0), "the number of sub-quantizers m", 1, MAX_PQ_M, sub,
                    "Use the m of the PQ that follows (OPQ16,PQ16).")
        if m.group(2) is not None:
            out = int(m.group(2))
            if not 1 <= out <= MAX_DIM:
                _refuse(text, m.group(0), "the output dimension", 1, MAX_DIM, out,
                        "OPQm_d rotates to d dimensions, a multiple of m.")
            shape.out_dims.append(out)
    for m in re.finditer(r"(?:PCAW?R?|RR|ITQ)(\d+)", text):
        out = int(m.group(1))
        if not 1 <= out <= MAX_DIM:
            _refuse(text, m.group(0), "the output dimension", 1, MAX_DIM, out,
                    "A pre-transform keeps at most as many dimensions as it gets.")
        shape.out_dims.append(out)
    for m in RABITQ_TOKEN.finditer(text):
        bits = int(m.group(2) or 1)
        if not 1 <= bits <= MAX_RABITQ_BITS:
            _refuse(text, m.group(0), "the bits per coordinate", 1, MAX_RABITQ_BITS, bits,
                    "RaBitQ is 1 bit per coordinate; RaBitQ4 (4 bits) is the usual multi-bit code.")
        shape.rabitq.append((m.group(0), bits, bool(m.group(1))))
    return shape


def rabitq_code_bytes(dim: int, bits: int = 1) -> int:
    """Bytes of one RaBitQ code of a ``dim``-d vector at ``bits`` per coordinate, its per-vector
    factors included (FAISS's ``RaBitQuantizer.code_size``): the sign bits, ``ceil(dim / 8)``,
    plus two float factors (8 B); a multi-bit code adds ``ceil(dim * (bits - 1) / 8)`` bytes of
    extra bits and three more floats (12 B). 384-d: ``RaBitQ`` 56 B, ``RaBitQ4`` 212 B."""
    d, b = int(dim), int(bits)
    size = -(-d // 8) + 8
    if b > 1:
        size += -(-d * (b - 1) // 8) + 12
    return size


def code_bytes(factory: str, dim: int) -> int | None:
    """Bytes one vector's code takes in a FAISS factory at ``dim`` dimensions (ids, graph links
    and IVF list overhead excluded): float32 / fp16 / SQ8 / SQ4 coordinates, PQ ``m * nbits / 8``,
    RaBitQ with its factors (:func:`rabitq_code_bytes`); None for other factories.

    Raises
    ------
    ConfigError
        A number of the factory out of range (:func:`factory_shape`).
    """
    shape = factory_shape(factory)
    d = min([int(dim), *shape.out_dims])
    up = str(factory).upper()
    if shape.rabitq:
        return rabitq_code_bytes(d, shape.rabitq[-1][1])
    if shape.pq:
        _, m, bits = shape.pq[-1]
        return -(-m * bits // 8)
    for key, per_dim in (("SQFP16", 2.0), ("SQ8", 1.0), ("SQ4", 0.5), ("FLAT", 4.0)):
        if key in up:
            return math.ceil(d * per_dim)
    if re.fullmatch(r"(HNSW\d+|NSG\d+)(,FLAT)?", up):
        return 4 * d
    return None


def structure_bytes(shape: FactoryShape, dim: int) -> int:
    """Bytes a factory allocates for ``dim``-d vectors before storing any: coarse centroids and
    empty inverted lists, and the codebooks of every product quantizer."""
    d = min([int(dim), *shape.out_dims])
    total = sum(n * (4 * d + 48) for _, n in shape.lists)
    total += sum((2 ** bits) * 4 * d for _, _, bits in shape.pq)
    return total


def probe_dim(shape: FactoryShape) -> int | None:
    """A dimension every sub-quantizer count divides, at least every pre-transform's output, at
    which FAISS can judge a factory string before the real dimension is known (None: too large)."""
    d = 1
    for _, sub, _ in shape.pq:
        d = d * sub // math.gcd(d, sub)
    need = max([64, *shape.out_dims])
    d *= -(-need // d)
    return d if d <= MAX_DIM else None


def quantization_label(factory: str) -> str:
    """The quantizer of a factory string (``HNSW32,SQ8`` -> ``sq8``; ``OPQ16,PQ16`` -> ``opq+pq``)."""
    found = RABITQ_TOKEN.search(factory)
    if found:  # RaBitQ / RaBitQ4: the bits are part of what the code keeps
        bits = int(found.group(2) or 1)
        return "rabitq" if bits == 1 else f"rabitq{bits}"
    up = factory.upper()
    for key, label in (("OPQ", "opq+pq"), ("PQ", "pq"), ("SQ8", "sq8"), ("SQ4", "sq4"),
                       ("SQFP16", "fp16"), ("LSH", "lsh")):
        if key in up:
            return label
    return "float32"


def min_train_vectors(factory: str) -> int:
    """The fewest vectors ``factory`` trains on: IVF needs a vector per list, each PQ / IMI
    sub-quantizer 2^nbits (256 by default): FAISS's k-means refuses fewer training points than
    centroids."""
    shape = factory_shape(factory)
    need = shape.nlist
    for _, _, bits in shape.pq:
        need = max(need, 2 ** bits)
    if "OPQ" in factory.upper():
        need = max(need, 256)  # OPQ trains its own 8-bit PQ
    if shape.rabitq:
        need = max(need, 1)  # RaBitQ trains the centre of the data
    return need


def dim_problem(factory: str, dim: int) -> str | None:
    """Why ``factory`` cannot hold ``dim``-d vectors: a dimension outside 1..65536, an
    allocation above :data:`MAX_STRUCTURE_BYTES` before any vector is stored, or FAISS's own
    answer (the factory is built, empty, at ``dim``: PQ m must divide it...); None if it can.

    Raises
    ------
    ConfigError
        A number of the factory out of range (:func:`factory_shape`), whatever the dimension.
    """
    import faiss

    shape = factory_shape(factory)
    if not 1 <= int(dim) <= MAX_DIM:
        return f"FAISS factory {factory!r}: vectors must have 1 to {MAX_DIM} dimensions, got {dim}"
    need = structure_bytes(shape, int(dim))
    if need > MAX_STRUCTURE_BYTES:
        parts = ", ".join(f"{tok}: {n:,} lists" for tok, n in shape.lists) or \
            ", ".join(f"{tok}: 2^{bits} centroids per sub-quantizer" for tok, _, bits in shape.pq)
        return (f"FAISS factory {factory!r} at {dim} dimensions would allocate about "
                f"{need / 2 ** 30:.1f} GiB ({parts}) before a single vector is stored, above "
                f"the {MAX_STRUCTURE_BYTES / 2 ** 30:.0f} GiB slimvec allows; use fewer IVF lists "
                "(about 4*sqrt(N) to 16*sqrt(N) for N vectors), fewer PQ bits, or reduce the "
                "dimension first")
    try:
        faiss.index_factory(int(dim), factory)
    except RuntimeError as exc:
        reason = str(exc).split("Error: ")[-1].strip()
        return f"FAISS factory {factory!r} cannot hold {dim}-d vectors ({reason})"
    return None


def check_factory(options: Mapping[str, Any], train_default: int, train_max: float) -> None:
    """Parse-time checks of a FAISS store's factory string and the options that depend on it:
    its numbers (:func:`factory_shape`), FAISS's own parser at a dimension that fits it, ``qb``
    and ``efc`` where the factory has them, and a ``train_size`` large enough to train it."""
    import faiss

    factory = str(options["factory"])
    shape = factory_shape(factory)
    probe = probe_dim(shape)
    if probe is not None and structure_bytes(shape, probe) <= MAX_STRUCTURE_BYTES:
        try:
            faiss.index_factory(probe, factory)
        except RuntimeError as exc:
            reason = str(exc).strip().splitlines()[-1].split("Error: ")[-1].strip()
            raise ConfigError(
                f"FAISS index_factory does not accept {factory!r} ({reason}). Check the "
                "spelling against the faiss index_factory documentation, e.g. HNSW32, Flat, "
                "IVF256,PQ16, HNSW32,SQ8, OPQ16,IVF256,PQ16.") from exc
    check_qb(factory, options.get("qb"))
    if options.get("efc") is not None and not re.search(r"HNSW\d", factory):
        raise ConfigError(f"Store 'faiss': option efc={options['efc']} is an HNSW graph's build "
                          f"beam, but factory {factory!r} has no HNSW graph: expected an HNSW "
                          "factory (HNSW32, HNSW16,SQ8). Drop efc=.")
    need = min_train_vectors(factory)
    if int(options["train_size"]) < need:
        advice = max(need, 39 * shape.nlist, train_default)
        raise ConfigError(
            f"Store 'faiss': option train_size={options['train_size']} is out of range for "
            f"{factory!r}: expected a whole number from {need} (the fewest vectors it trains "
            f"on) to {train_max:.0f}, got {options['train_size']}. Add "
            f"train_size={advice} (FAISS advises 39 training vectors per IVF list).")


def check_qb(factory: str, qb: Any) -> None:
    """Refuse ``qb`` (RaBitQ query bits) on a factory without RaBitQ, and ``qb=0`` (float
    queries) on fast-scan RaBitQ: FAISS aborts the whole process on the latter at the first
    search (``'qb > 0' failed``) instead of raising."""
    if qb is None:
        return
    shape = factory_shape(factory)
    if not shape.rabitq:
        raise ConfigError(f"Store 'faiss': option qb={qb} is RaBitQ's query bits, but factory "
                          f"{factory!r} has no RaBitQ quantizer: expected a RaBitQ factory "
                          "(RaBitQ, RaBitQ4, IVF1024,RaBitQ, RaBitQfs). Drop qb=.")
    if int(qb) == 0 and any(fast for _, _, fast in shape.rabitq):
        raise ConfigError(f"Store 'faiss': option qb=0 is out of range for fast-scan factory "
                          f"{factory!r}: expected a whole number from 1 to 8, got 0 (fast-scan "
                          "RaBitQ always quantizes the query; float queries need RaBitQ).")
