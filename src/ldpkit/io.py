"""Saving and loading Reports and Stats with the spec and its fingerprint.

Three wire formats for Reports, all carrying the spec and its fingerprint:

- ``.npz`` (numpy, compressed; loaded with ``allow_pickle=False``, so no pickles);
- Apache Parquet (one row per user; bit-packed ``bits`` as a fixed-size binary column; the
  spec in the schema metadata; read in row groups with :func:`iter_reports_parquet`);
- a JSON-safe dict (:func:`reports_to_dict`) for small clients that cannot write either.

Stats go to JSON (:meth:`ldpkit.Stats.to_dict`). Loading checks the stored fingerprint
against the rebuilt spec, and callers can demand an expected spec, so a server never mixes
reports from another configuration. pyarrow is imported on first use only, so clients that
never touch Parquet do not pay for it.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

import numpy as np

from .spec import Mechanism, Reports, Stats, spec_from_dict

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "save_reports",
    "load_reports",
    "save_reports_parquet",
    "load_reports_parquet",
    "iter_reports_parquet",
    "iter_reports_npz",
    "reports_to_arrow",
    "reports_from_arrow",
    "reports_to_bytes",
    "reports_from_bytes",
    "reports_to_dict",
    "reports_from_dict",
    "decoded_size",
    "save_stats",
    "load_stats",
]

_META = "__ldpkit_meta__"
#: Schema-metadata key of Parquet/Arrow reports.
PARQUET_META_KEY = b"ldpkit"
_FORMAT = "ldpkit.reports/1"
_NPZ_MAGIC = b"PK\x03\x04"
_PARQUET_MAGIC = b"PAR1"
#: Default target size of one Parquet row group (uncompressed), in bytes.
_ROW_GROUP_BYTES = 64 * 2**20
#: Largest Parquet row group written (rows): pyarrow's default cap on row groups.
_MAX_ROW_GROUP = 2**20

WireFormat = Literal["npz", "parquet"]
Source = str | os.PathLike[str] | IO[bytes]


def _check_expected(spec: Mechanism, expected: Mechanism | None, what: str) -> None:
    if expected is not None and not isinstance(expected, Mechanism):
        raise TypeError(
            f"expected must be a mechanism spec (ldpkit.Mechanism) or None, "
            f"got {type(expected).__name__}"
        )
    if expected is not None and spec != expected:
        raise ValueError(
            f"{what} must come from {expected!r} (fingerprint {expected.fingerprint}), "
            f"got {what} from {spec!r} (fingerprint {spec.fingerprint})"
        )


def _check_reports(reports: Any) -> Reports:
    if not isinstance(reports, Reports):
        raise TypeError(f"reports must be ldpkit.Reports, got {type(reports).__name__}")
    return reports


def _header(reports: Reports) -> dict[str, Any]:
    return {
        "format": _FORMAT,
        "mechanism": reports.spec.to_dict(),
        "fingerprint": reports.fingerprint,
    }


def _spec_from_header(meta: Any, source: str) -> Mechanism:
    """Rebuild and verify the spec of a reports header; ValueError naming ``source`` otherwise."""
    try:
        if not isinstance(meta, Mapping) or meta.get("format") not in (None, _FORMAT):
            raise ValueError(f"format must be {_FORMAT!r}")
        spec = spec_from_dict(meta["mechanism"])
        fingerprint = meta["fingerprint"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"{source} must hold valid ldpkit reports metadata, got an error: {exc}"
        ) from exc
    if fingerprint != spec.fingerprint:
        raise ValueError(
            f"fingerprint must match the mechanism {spec!r} ({spec.fingerprint}), got {fingerprint!r}"
        )
    return spec


# -- integrity digest --------------------------------------------------------------------
def _digest(arrays: Mapping[str, np.ndarray], start: int = 0, stop: int | None = None) -> str:
    """SHA-256 of rows ``start:stop`` of every field (name, dtype, row shape and bytes).

    Stored in the file's metadata and checked on load, so a corrupted file raises instead
    of decoding to other reports (a format's own checksums do not cover everything).
    """
    h = hashlib.sha256()
    for name in sorted(arrays):
        arr = arrays[name][start:stop]
        native = arr.astype(arr.dtype.newbyteorder("="), copy=False)
        h.update(json.dumps([name, native.dtype.str, list(arr.shape[1:])]).encode())
        h.update(np.ascontiguousarray(native).tobytes())
    return h.hexdigest()


def _block_digests(reports: Reports, rows: int) -> dict[str, Any]:
    n, arrays = len(reports), dict(reports.arrays)
    blocks = [_digest(arrays, s, s + rows) for s in range(0, n, rows)] or [_digest(arrays)]
    return {"algorithm": "sha256", "rows": rows, "blocks": blocks}


def _check_blocks(
    arrays: Mapping[str, np.ndarray], digest: Any, first_row: int, total: int, source: str
) -> None:
    """Check rows of a file against its per-block digests.

    Rows ``first_row:first_row + len`` of a file of ``total`` rows; ValueError when a block
    differs or the layout is corrupt.
    """
    try:
        rows, blocks = digest["rows"], digest["blocks"]
        valid = (
            digest["algorithm"] == "sha256"
            and isinstance(rows, int)
            and rows >= 1
            and isinstance(blocks, list)
            and len(blocks) == max(1, -(-total // rows))
            and first_row % rows == 0
        )
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{source} has corrupt ldpkit metadata (digest): {exc}") from exc
    if not valid:
        raise ValueError(f"{source} has corrupt ldpkit metadata (digest layout)")
    n = len(next(iter(arrays.values())))
    for start in range(0, max(n, 1), rows):
        if _digest(arrays, start, start + rows) != blocks[(first_row + start) // rows]:
            raise ValueError(
                f"{source} is corrupt: the digest of rows {first_row + start}.."
                f"{first_row + min(n, start + rows) - 1} does not match the one stored"
            )


def _as_path(path: Any, name: str = "path") -> Path:
    """``path`` (a str or os.PathLike) as a Path; anything else is a TypeError naming it."""
    if isinstance(path, (str, os.PathLike)):
        return Path(path)
    raise TypeError(f"{name} must be a file path (str or os.PathLike), got {type(path).__name__}")


def _check_source(source: Any, name: str = "path") -> Any:
    """Return a path (as a Path) or an open binary file object (as it is)."""
    if hasattr(source, "read") or hasattr(source, "write"):
        return source
    if isinstance(source, (str, os.PathLike)):
        return Path(source)
    raise TypeError(
        f"{name} must be a file path (str or os.PathLike) or a binary file object, "
        f"got {type(source).__name__}"
    )


def _name(source: Any) -> str:
    return repr(os.fspath(source)) if isinstance(source, (str, os.PathLike)) else "the data"


# -- npz ------------------------------------------------------------------------------------
def _write_npz(reports: Reports, fh: IO[bytes]) -> None:
    if _META in reports.fields:
        raise ValueError(f"reports must not have a field named {_META!r}")
    arrays: dict[str, Any] = dict(reports.arrays)
    header = {**_header(reports), "digest": _digest(arrays)}
    arrays[_META] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    np.savez_compressed(fh, **arrays)


def _read_npz(source: Source, expected: Mechanism | None) -> Reports:
    # A damaged zip can fail deep inside zipfile/zlib/numpy with any exception type
    # (BadZipFile, zlib.error, EOFError, RuntimeError, NotImplementedError...): this is a
    # decode boundary, so every failure to decode becomes one ValueError naming the source.
    try:
        data = np.load(source, allow_pickle=False)
    except Exception as exc:
        raise ValueError(
            f"{_name(source)} must be an ldpkit reports file, got an error: {exc}"
        ) from exc
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ValueError(f"{_name(source)} must be an ldpkit reports file, got a plain .npy array")
    with data:
        try:
            has_meta = _META in data.files
            raw = data[_META] if has_meta else None
        except Exception as exc:
            raise ValueError(f"{_name(source)} has corrupt ldpkit metadata: {exc}") from exc
        if raw is None:
            raise ValueError(f"path must be an ldpkit reports file, got {_name(source)}")
        try:
            meta = json.loads(raw.tobytes().decode())
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"{_name(source)} has corrupt ldpkit metadata: {exc}") from exc
        spec = _spec_from_header(meta, _name(source))
        _check_expected(spec, expected, "reports")
        try:
            arrays = {k: data[k] for k in data.files if k != _META}
        except Exception as exc:
            raise ValueError(f"{_name(source)} has a corrupt array: {exc}") from exc
    if "digest" in meta and (not arrays or _digest(arrays) != meta["digest"]):
        raise ValueError(
            f"{_name(source)} is corrupt: the digest of its arrays does not match the one stored"
        )
    return Reports(spec, **arrays)


#: Largest metadata member of an npz reports file (JSON: spec, fingerprint, digest).
_NPZ_META_MAX = 2**20


def _npy_header(member: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    """Shape, Fortran order and dtype of an npy stream, read from its header only."""
    version = np.lib.format.read_magic(member)
    if version not in ((1, 0), (2, 0)):
        raise ValueError(f"npy format version must be 1.0 or 2.0, got {version}")
    read_header = (
        np.lib.format.read_array_header_1_0
        if version == (1, 0)
        else np.lib.format.read_array_header_2_0
    )
    shape, fortran, dtype = read_header(member)
    if dtype.hasobject:
        raise ValueError(f"arrays must hold numbers, got dtype {dtype}")
    return tuple(shape), bool(fortran), dtype


class _NpyRows:
    """Reader of an npy member of a zip, a block of rows at a time (C order).

    A Fortran-ordered member with several columns is read whole (rare: ldpkit writes C
    order).
    """

    def __init__(self, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> None:
        self.stream = zf.open(info)
        self.shape, fortran, self.dtype = _npy_header(self.stream)
        if not self.shape:
            raise ValueError(
                f"report arrays must have one row per user, got a scalar {info.filename}"
            )
        self.n = self.shape[0]
        self.row_bytes = math.prod(self.shape[1:]) * self.dtype.itemsize
        self.whole: np.ndarray | None = None
        if fortran and len(self.shape) > 1:
            data = self._read(self.n * self.row_bytes)
            flat = np.frombuffer(data, dtype=self.dtype)
            self.whole = flat.reshape(self.shape[::-1]).T
        self.done = 0

    def _read(self, size: int) -> bytes:
        data = self.stream.read(size)
        if len(data) != size:
            raise ValueError(f"npy data must hold {size} more bytes, got {len(data)} (truncated)")
        return data

    def rows(self, count: int) -> np.ndarray:
        start, self.done = self.done, self.done + count
        if self.whole is not None:
            return np.ascontiguousarray(self.whole[start : start + count])
        flat = np.frombuffer(self._read(count * self.row_bytes), dtype=self.dtype)
        return flat.reshape(count, *self.shape[1:])

    def finish(self) -> None:
        """Read to the end of the member, so zipfile checks its CRC-32."""
        if self.stream.read(1):
            raise ValueError("npy member must end after its array, got trailing bytes")
        self.stream.close()


def iter_reports_npz(
    source: Source, *, expected: Mechanism | None = None, batch_size: int = 65_536
) -> Iterator[Reports]:
    """Read npz reports (:func:`save_reports`) ``batch_size`` rows at a time.

    Memory stays bounded by one batch whatever the file's size: each array is decompressed
    as a stream and read a block of rows at a time (the npy headers give shape and dtype
    first). The metadata, ``expected`` and the digest of the arrays are checked before the
    first batch is yielded (the digest in a first streaming pass, so a corrupted file
    yields nothing); an empty file yields one empty batch.

    Examples
    --------
    >>> import io
    >>> from ldpkit import GRR
    >>> spec = GRR(epsilon=1.0, domain_size=4)
    >>> data = reports_to_bytes(spec.randomize([0, 1, 2, 3] * 25, rng=0))
    >>> [len(b) for b in iter_reports_npz(io.BytesIO(data), expected=spec, batch_size=40)]
    [40, 40, 20]
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    # Checked here, before the lazy generator starts, so the error names the argument.
    if isinstance(source, (str, os.PathLike)):
        if not os.path.isfile(source):
            raise FileNotFoundError(f"source {_name(source)} is not an existing file")
    elif isinstance(source, bool) or not (hasattr(source, "read") and hasattr(source, "seek")):
        raise TypeError(
            "source must be a path or a binary file object with read() and seek(), "
            f"got {type(source).__name__}"
        )
    name = _name(source)
    return _decode_errors(_iter_npz(source, expected, batch_size, name), name)


def _decode_errors(batches: Iterator[Reports], name: str) -> Iterator[Reports]:
    while True:
        # A damaged zip can fail inside zipfile/zlib/numpy with any exception type: every
        # failure to decode becomes one ValueError naming the source (as in _read_npz).
        try:
            batch = next(batches)
        except StopIteration:
            return
        except (ValueError, OSError):  # OSError: a missing or unreadable path, as in load_reports
            raise
        except Exception as exc:
            raise ValueError(f"{name} must be an ldpkit reports file, got an error: {exc}") from exc
        yield batch


def _iter_npz(
    source: Source, expected: Mechanism | None, batch_size: int, name: str
) -> Iterator[Reports]:
    with zipfile.ZipFile(source) as zf:
        members: dict[str, zipfile.ZipInfo] = {}
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                raise ValueError(f"{name} must hold only .npy arrays, got {info.filename!r}")
            members[info.filename[:-4]] = info
        if _META not in members:
            raise ValueError(f"path must be an ldpkit reports file, got {name}")
        with zf.open(members[_META]) as member:
            shape, _, dtype = _npy_header(member)
            if dtype != np.uint8 or len(shape) != 1 or shape[0] > _NPZ_META_MAX:
                raise ValueError(
                    f"{name} has corrupt ldpkit metadata: it must be at most {_NPZ_META_MAX} "
                    f"bytes, got shape {shape} of {dtype}"
                )
            raw = member.read(shape[0])
        try:
            meta = json.loads(raw.decode())
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"{name} has corrupt ldpkit metadata: {exc}") from exc
        spec = _spec_from_header(meta, name)
        _check_expected(spec, expected, "reports")
        fields = sorted(k for k in members if k != _META)
        if not fields:
            raise ValueError(f"{name} must hold at least one report array, got none")
        if "digest" in meta:  # first pass: the digest of _digest, one field after the other
            h = hashlib.sha256()
            for k in fields:
                reader = _NpyRows(zf, members[k])
                native = reader.dtype.newbyteorder("=")
                h.update(json.dumps([k, native.str, list(reader.shape[1:])]).encode())
                while reader.done < reader.n:
                    block = reader.rows(min(batch_size, reader.n - reader.done))
                    h.update(np.ascontiguousarray(block.astype(native, copy=False)).tobytes())
                reader.finish()
            if h.hexdigest() != meta["digest"]:
                raise ValueError(
                    f"{name} is corrupt: the digest of its arrays does not match the one stored"
                )
        readers = {k: _NpyRows(zf, members[k]) for k in fields}
        lengths = {k: r.n for k, r in readers.items()}
        if len(set(lengths.values())) != 1:
            raise ValueError(f"report arrays must all have one row per user, got lengths {lengths}")
        n = next(iter(lengths.values()))
        done = 0
        while True:
            count = min(batch_size, n - done)
            yield Reports(spec, **{k: r.rows(count) for k, r in readers.items()})
            done += count
            if done >= n:
                break
        for r in readers.values():
            r.finish()


# -- Arrow / Parquet ------------------------------------------------------------------------
def _arrow_column(name: str, arr: np.ndarray) -> tuple[pa.Array, dict[str, Any]]:
    """One Arrow column for one report field, plus what is needed to rebuild it exactly."""
    import pyarrow as pa

    native = arr.astype(arr.dtype.newbyteorder("="), copy=False)
    info: dict[str, Any] = {"dtype": native.dtype.str, "shape": list(arr.shape[1:])}
    try:
        value_type = pa.from_numpy_dtype(native.dtype)
    except (NotImplementedError, pa.ArrowNotImplementedError, TypeError) as exc:
        raise TypeError(f"reports.{name} must have a numeric dtype, got {arr.dtype}") from exc
    if arr.ndim == 1:
        return pa.array(native, type=value_type), info
    width = math.prod(arr.shape[1:])
    if width == 0:
        raise ValueError(f"reports.{name} must have at least one column, got shape {arr.shape}")
    n = arr.shape[0]
    flat = np.ascontiguousarray(native).reshape(n * width)
    if native.dtype == np.uint8:
        # Packed bits: one fixed-size binary value per user, no per-byte list overhead.
        column = pa.FixedSizeBinaryArray.from_buffers(
            pa.binary(width), n, [None, pa.py_buffer(flat)]
        )
        info["arrow"] = "binary"
        return column, info
    info["arrow"] = "list"
    return pa.FixedSizeListArray.from_arrays(pa.array(flat, type=value_type), width), info


def reports_to_arrow(reports: Reports) -> pa.Table:
    """Return an Arrow table with one row per user and the spec in the schema metadata.

    1-D fields become primitive columns of the same dtype; 2-D ``uint8`` fields (bit-packed
    unary reports, ``np.packbits(..., axis=1)``) become ``fixed_size_binary(width)``; other
    multi-column fields become ``fixed_size_list``. The metadata key ``b"ldpkit"`` holds
    ``{"format", "mechanism", "fingerprint", "fields", "digest"}`` as JSON; ``digest``
    holds the SHA-256 of every block of ``digest["rows"]`` rows (one block per Parquet row
    group in files from :func:`save_reports_parquet`), checked on load.
    """
    reports = _check_reports(reports)
    return _to_arrow(reports, max(len(reports), 1))


def _to_arrow(reports: Reports, rows: int) -> pa.Table:
    import pyarrow as pa

    columns, fields = {}, {}
    for name, arr in reports.arrays.items():
        columns[name], fields[name] = _arrow_column(name, arr)
    meta = {**_header(reports), "fields": fields, "digest": _block_digests(reports, rows)}
    table = pa.table(columns)
    return table.replace_schema_metadata({PARQUET_META_KEY: json.dumps(meta).encode()})


def _arrow_meta(schema: pa.Schema, source: str) -> tuple[Mechanism, dict[str, Any], Any]:
    raw = (schema.metadata or {}).get(PARQUET_META_KEY)
    if raw is None:
        raise ValueError(
            f"{source} must be an ldpkit reports Parquet file (no {PARQUET_META_KEY!r} metadata)"
        )
    try:
        meta = json.loads(raw.decode())
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{source} has corrupt ldpkit metadata: {exc}") from exc
    spec = _spec_from_header(meta, source)
    fields = meta.get("fields") if isinstance(meta, Mapping) else None
    if not isinstance(fields, Mapping) or not fields:
        raise ValueError(f"{source} has corrupt ldpkit metadata: no report fields listed")
    return spec, dict(fields), meta.get("digest")


def _numpy_column(name: str, column: Any, info: Mapping[str, Any], source: str) -> np.ndarray:
    """Rebuild one report field from a (chunked) Arrow column; ValueError on any mismatch."""
    import pyarrow as pa

    try:
        dtype = np.dtype(info["dtype"])
        shape = tuple(int(s) for s in info["shape"])
        value_type = pa.from_numpy_dtype(dtype)
    except (
        KeyError,
        TypeError,
        ValueError,
        NotImplementedError,
        pa.ArrowNotImplementedError,
    ) as exc:
        raise ValueError(f"{source} has corrupt ldpkit metadata for field {name!r}: {exc}") from exc
    if column.null_count:
        raise ValueError(f"reports.{name} must have no missing values, got {column.null_count}")
    n = len(column)
    width = math.prod(shape)
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    if not shape:
        expected_type = value_type
    elif info.get("arrow") == "binary":
        expected_type = pa.binary(width)
    else:
        expected_type = pa.list_(value_type, width)
    if column.type != expected_type:
        raise ValueError(
            f"reports.{name} must be stored as Arrow {expected_type} (per the ldpkit metadata), "
            f"got {column.type} in {source}"
        )
    if not shape:
        parts = [c.to_numpy(zero_copy_only=False) for c in chunks]
    elif info.get("arrow") == "binary":
        parts = []
        for c in chunks:
            buf = c.buffers()[1]
            parts.append(
                np.frombuffer(buf, np.uint8, count=len(c) * width, offset=c.offset * width)
                if len(c)
                else np.empty(0, np.uint8)
            )
    else:
        parts = [c.flatten().to_numpy(zero_copy_only=False) for c in chunks]
    flat = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.empty(0, dtype)
    return flat.astype(dtype, copy=False).reshape((n, *shape))


def reports_from_arrow(
    table: pa.Table, *, expected: Mechanism | None = None, source: str = "the table"
) -> Reports:
    """Read Reports from an Arrow table (the inverse of :func:`reports_to_arrow`).

    Checks the fingerprint, ``expected`` and the digest of the arrays.
    """
    import pyarrow as pa

    if not isinstance(table, pa.Table):
        raise TypeError(f"table must be a pyarrow.Table, got {type(table).__name__}")
    spec, fields, digest = _arrow_meta(table.schema, source)
    _check_expected(spec, expected, "reports")
    return _table_reports(table, spec, fields, source, digest, 0, table.num_rows)


def _table_reports(
    table: pa.Table,
    spec: Mechanism,
    fields: Mapping[str, Any],
    source: str,
    digest: Any,
    first_row: int,
    total: int,
) -> Reports:
    """Return Reports from rows ``first_row:`` of a file of ``total`` rows.

    Checked against the file's digest (files without one, written before it existed, are
    not checked).
    """
    missing = [k for k in fields if k not in table.column_names]
    if missing:
        raise ValueError(f"{source} must have columns {list(fields)}, missing {missing}")
    arrays = {k: _numpy_column(k, table.column(k), info, source) for k, info in fields.items()}
    if digest is not None:
        _check_blocks(arrays, digest, first_row, total, source)
    return Reports(spec, **arrays)


def _default_row_group(reports: Reports) -> int:
    row_bytes = sum(a.itemsize * math.prod(a.shape[1:]) for a in reports.arrays.values())
    return max(1024, _ROW_GROUP_BYTES // max(row_bytes, 1))


def save_reports_parquet(
    reports: Reports,
    path: Source,
    *,
    row_group_size: int | None = None,
    compression: str | None = "zstd",
) -> Path | IO[bytes]:
    """Write reports to a Parquet file (one row per user) with the spec in its metadata.

    Parameters
    ----------
    reports : Reports
        The batch to write.
    path : path or binary file object
        Where to write.
    row_group_size : int or None
        Rows per row group (the unit :func:`iter_reports_parquet` reads). By default about
        64 MiB of uncompressed report data per group, and at least 1024 rows.
    compression : str or None
        Parquet codec (``"zstd"``, ``"snappy"``, ``None``...). Randomized bits barely
        compress; integer item columns of small domains do.

    Returns
    -------
    Path or file object
        ``path`` (as a Path when it was a path).
    """
    import pyarrow.parquet as pq

    reports = _check_reports(reports)
    size = _default_row_group(reports) if row_group_size is None else int(row_group_size)
    if size < 1:
        raise ValueError(f"row_group_size must be an integer >= 1, got {row_group_size!r}")
    # pyarrow caps row groups at 2^20 rows by default; keep digest blocks = row groups.
    size = min(size, _MAX_ROW_GROUP)
    table = _to_arrow(reports, size)
    target = Path(path) if isinstance(path, (str, os.PathLike)) else path
    pq.write_table(table, target, row_group_size=size, compression=compression)
    return target


def _parquet_file(source: Source) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    source = _check_source(source)
    try:
        return pq.ParquetFile(source)
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(
            f"path must be a Parquet file, got {_name(source)} and the error: {exc}"
        ) from exc


def load_reports_parquet(path: Source, *, expected: Mechanism | None = None) -> Reports:
    """Read a whole Parquet file written by :func:`save_reports_parquet`."""
    import pyarrow as pa

    pf = _parquet_file(path)
    try:
        spec, fields, digest = _arrow_meta(pf.schema_arrow, _name(path))
        _check_expected(spec, expected, "reports")
        table = pf.read(columns=list(fields))
    except (OSError, pa.ArrowException) as exc:
        raise ValueError(
            f"{_name(path)} must be a readable Parquet file, got an error: {exc}"
        ) from exc
    finally:
        pf.close()  # closes only a file it opened itself, never the caller's file object
    return _table_reports(table, spec, fields, _name(path), digest, 0, table.num_rows)


def iter_reports_parquet(
    path: Source, *, expected: Mechanism | None = None, batch_size: int | None = None
) -> Iterator[Reports]:
    """Read a Parquet reports file lazily, one Reports batch at a time.

    With ``batch_size=None`` each batch is one row group (as written); otherwise batches
    have ``batch_size`` rows (the last may be shorter). Memory stays bounded by one batch,
    so ``sum(spec.aggregate(b) for b in ...)`` aggregates files larger than memory. The
    metadata and ``expected`` are checked before the first batch is read.

    Examples
    --------
    >>> import io
    >>> from ldpkit import OUE
    >>> spec = OUE(epsilon=1.0, domain_size=20)
    >>> buf = io.BytesIO()
    >>> _ = save_reports_parquet(spec.randomize(list(range(20)) * 50, rng=0), buf, row_group_size=300)
    >>> [len(r) for r in iter_reports_parquet(buf, expected=spec)]
    [300, 300, 300, 100]
    """
    import pyarrow as pa

    if batch_size is not None and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(f"batch_size must be an integer >= 1 or None, got {batch_size!r}")
    pf = _parquet_file(path)
    try:
        spec, fields, digest = _arrow_meta(pf.schema_arrow, _name(path))
        _check_expected(spec, expected, "reports")
    except ValueError:
        pf.close()
        raise
    columns = list(fields)
    total = pf.metadata.num_rows

    def groups() -> Iterator[Reports]:
        # Row groups, each checked against its digest block before it is handed out.
        first = 0
        for i in range(pf.num_row_groups):
            table = pf.read_row_group(i, columns=columns)
            yield _table_reports(table, spec, fields, _name(path), digest, first, total)
            first += table.num_rows

    def batches() -> Iterator[Reports]:
        try:
            if batch_size is None:
                yield from groups()
            else:
                pending: Reports | None = None
                for group in groups():
                    pending = group if pending is None else pending.concat(group)
                    while len(pending) >= batch_size:
                        yield pending[:batch_size]
                        pending = pending[batch_size:]
                if pending is not None and len(pending):
                    yield pending
        except (OSError, pa.ArrowException) as exc:
            raise ValueError(
                f"{_name(path)} must be a readable Parquet file, got an error: {exc}"
            ) from exc
        finally:
            pf.close()

    return batches()


# -- format dispatch ------------------------------------------------------------------------
def _sniff(head: bytes) -> WireFormat | None:
    if head.startswith(_NPZ_MAGIC):
        return "npz"
    if head.startswith(_PARQUET_MAGIC):
        return "parquet"
    return None


def save_reports(
    reports: Reports, path: str | os.PathLike[str], *, format: WireFormat | None = None
) -> Path:
    """Write reports to ``path`` with the spec and its fingerprint.

    ``format`` is ``"npz"`` or ``"parquet"``; by default Parquet for a ``.parquet`` or
    ``.pq`` suffix and npz otherwise.
    """
    reports = _check_reports(reports)
    target = _as_path(path)
    if format is None:
        format = "parquet" if target.suffix.lower() in (".parquet", ".pq") else "npz"
    if format == "parquet":
        save_reports_parquet(reports, target)
    elif format == "npz":
        with open(target, "wb") as fh:
            _write_npz(reports, fh)
    else:
        raise ValueError(f"format must be 'npz' or 'parquet', got {format!r}")
    return target


def load_reports(path: str | os.PathLike[str], *, expected: Mechanism | None = None) -> Reports:
    """Read reports saved by :func:`save_reports` (npz or Parquet, told apart by content).

    ``expected`` demands a configuration.
    """
    path = _as_path(path)
    with open(path, "rb") as fh:
        kind = _sniff(fh.read(4))
    if kind == "parquet":
        return load_reports_parquet(path, expected=expected)
    return _read_npz(path, expected)


def reports_to_bytes(reports: Reports, format: WireFormat = "npz") -> bytes:
    """Return the bytes :func:`save_reports` would write (what a client POSTs to a collector).

    Examples
    --------
    >>> from ldpkit import GRR
    >>> spec = GRR(epsilon=1.0, domain_size=4)
    >>> data = reports_to_bytes(spec.randomize([0, 1, 2, 3], rng=0), format="parquet")
    >>> reports_from_bytes(data, expected=spec).values.tolist()
    [1, 1, 2, 3]
    """
    reports = _check_reports(reports)
    buf = io.BytesIO()
    if format == "npz":
        _write_npz(reports, buf)
    elif format == "parquet":
        save_reports_parquet(reports, buf)
    else:
        raise ValueError(f"format must be 'npz' or 'parquet', got {format!r}")
    return buf.getvalue()


def _row_width(schema: pa.Schema) -> int:
    """Bytes per row of a schema of fixed-width columns (what decoding one row allocates)."""
    import pyarrow as pa

    width = 0
    for field in schema:
        t = field.type
        if isinstance(t, pa.FixedSizeBinaryType):
            width += t.byte_width
        elif isinstance(t, pa.FixedSizeListType):
            width += t.list_size * max(t.value_type.bit_width // 8, 1)
        else:
            width += max(getattr(t, "bit_width", 64) // 8, 1)
    return width


def decoded_size(data: bytes) -> int | None:
    """Bytes that decoding an npz or Parquet payload would allocate (None if neither).

    Read from the headers only (npy array headers in the zip; row counts times the schema's
    fixed row width, or the declared uncompressed size if larger, for Parquet), so a server
    can refuse a small compressed body that would expand into gigabytes before decoding it.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    data = bytes(data)
    kind = _sniff(data[:4])
    try:
        if kind == "npz":
            total = 0
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                for info in zf.infolist():
                    with zf.open(info) as member:
                        version = np.lib.format.read_magic(member)
                        if version not in ((1, 0), (2, 0)):
                            raise ValueError(
                                f"npy format version must be 1.0 or 2.0, got {version}"
                            )
                        read_header = (
                            np.lib.format.read_array_header_1_0
                            if version == (1, 0)
                            else np.lib.format.read_array_header_2_0
                        )
                        shape, _, dtype = read_header(member)
                    total += max(math.prod(shape) * dtype.itemsize, info.file_size)
            return total
        if kind == "parquet":
            pf = _parquet_file(io.BytesIO(data))
            md = pf.metadata
            declared = sum(md.row_group(i).total_byte_size for i in range(md.num_row_groups))
            return max(declared, md.num_rows * _row_width(pf.schema_arrow))
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise ValueError(
            f"data must be an npz or Parquet reports payload, got an error: {exc}"
        ) from exc
    return None


def reports_from_bytes(data: bytes, *, expected: Mechanism | None = None) -> Reports:
    """Decode npz or Parquet bytes (told apart by their magic number) into Reports."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    data = bytes(data)
    kind = _sniff(data[:4])
    if kind == "npz":
        return _read_npz(io.BytesIO(data), expected)
    if kind == "parquet":
        return load_reports_parquet(io.BytesIO(data), expected=expected)
    raise ValueError(
        f"data must be npz (starting with {_NPZ_MAGIC!r}) or Parquet (starting with "
        f"{_PARQUET_MAGIC!r}) reports, got bytes starting with {data[:4]!r}"
    )


# -- JSON -------------------------------------------------------------------------------------
def reports_to_dict(reports: Reports) -> dict[str, Any]:
    """Return a JSON-safe dict: header plus ``arrays: {name: {"dtype", "shape", "data"}}``.

    Exact for every dtype (``uint64`` seeds are Python ints; JSON readers in languages
    with 53-bit numbers should send them as decimal strings, which
    :func:`reports_from_dict` accepts).
    """
    reports = _check_reports(reports)
    return {
        **_header(reports),
        "arrays": {
            k: {"dtype": v.dtype.str, "shape": list(v.shape), "data": v.tolist()}
            for k, v in reports.arrays.items()
        },
    }


def _json_array(name: str, entry: Any, dtype: np.dtype | None) -> np.ndarray:
    """One report field from JSON; refuses lossy conversions (floats or bools to integers)."""
    if isinstance(entry, Mapping):
        data = entry.get("data")
        if entry.get("dtype") is not None:
            try:
                dtype = np.dtype(entry["dtype"])
            except TypeError as exc:
                raise ValueError(
                    f"reports.{name}.dtype must be a numpy dtype name, got {entry['dtype']!r}"
                ) from exc
    else:
        data = entry
    if not isinstance(data, list):
        raise ValueError(
            f"reports.{name} must be a JSON array (one entry per user), got {type(data).__name__}"
        )
    try:
        if dtype is None:
            arr = np.asarray(data)
        else:
            # An object array keeps every JSON value as parsed, so the check below sees
            # exactly what was sent (np.asarray would turn mixed big ints into floats).
            probe = np.array(data, dtype=object)
            if dtype.kind in "iu":
                allowed: tuple[type, ...] = (int, str)
            elif dtype.kind == "f":
                allowed = (int, float)
            else:
                allowed = (bool,) if dtype.kind == "b" else ()
            bad = (
                next(
                    (
                        x
                        for x in probe.ravel()
                        if not isinstance(x, allowed)
                        or (isinstance(x, bool) and bool not in allowed)
                    ),
                    None,
                )
                if probe.size
                else None
            )
            if bad is not None:
                raise ValueError(
                    f"entry {bad!r} ({type(bad).__name__}) cannot be stored as {dtype}"
                )
            arr = np.array(data, dtype=dtype)
    except (ValueError, TypeError, OverflowError) as exc:
        raise ValueError(
            f"reports.{name} must be a rectangular array of {dtype or 'numbers'}, got an error: {exc}"
        ) from exc
    if (
        isinstance(entry, Mapping)
        and entry.get("shape") is not None
        and list(arr.shape) != list(entry["shape"])
    ):
        raise ValueError(
            f"reports.{name} must have the declared shape {entry['shape']}, got {list(arr.shape)}"
        )
    return arr


def reports_from_dict(
    data: Mapping[str, Any],
    *,
    expected: Mechanism | None = None,
    dtypes: Mapping[str, np.dtype] | None = None,
) -> Reports:
    """Inverse of :func:`reports_to_dict`.

    ``mechanism`` may be omitted when ``expected`` is given (then ``fingerprint`` must
    match it), and an array's ``dtype``/``shape`` may be omitted: ``dtypes`` (field ->
    dtype, e.g. from a reference batch) supplies the dtype, else numpy infers it.
    Lossy conversions are refused: a float or a bool is never turned into an integer.
    """
    if not isinstance(data, Mapping):
        raise TypeError(f"data must be a JSON object, got {type(data).__name__}")
    if "mechanism" in data or expected is None:
        spec = _spec_from_header(data, "the JSON reports")
        _check_expected(spec, expected, "reports")
    else:
        spec = expected
        if data.get("fingerprint") != expected.fingerprint:
            raise ValueError(
                f"reports must come from {expected!r} (fingerprint {expected.fingerprint}), "
                f"got reports with fingerprint {data.get('fingerprint')!r}"
            )
    arrays = data.get("arrays")
    if not isinstance(arrays, Mapping) or not arrays:
        raise ValueError(
            "arrays must be a non-empty JSON object {field: {dtype, data}}, got "
            f"{type(arrays).__name__}"
        )
    dtypes = dtypes or {}
    return Reports(spec, **{k: _json_array(k, v, dtypes.get(k)) for k, v in arrays.items()})


# -- Stats ------------------------------------------------------------------------------------
def save_stats(stats: Stats, path: str | os.PathLike[str]) -> Path:
    """Write stats to ``path`` as JSON (exact for float64)."""
    if not isinstance(stats, Stats):
        raise TypeError(f"stats must be ldpkit.Stats, got {type(stats).__name__}")
    target = _as_path(path)
    target.write_text(json.dumps(stats.to_dict()))
    return target


def load_stats(path: str | os.PathLike[str], *, expected: Mechanism | None = None) -> Stats:
    """Read stats saved by :func:`save_stats`; ``expected`` demands a configuration."""
    target = _as_path(path)
    try:
        data = json.loads(target.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"path must be a stats file written by save_stats, got {exc}") from None
    stats = Stats.from_dict(data)
    _check_expected(stats.spec, expected, "stats")
    return stats
