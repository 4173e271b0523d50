"""Streaming npz decode: same reports as the whole-file reader, bounded memory, clear errors."""

import io
import json
import tracemalloc
import zipfile

import numpy as np
import pytest

from ldpkit import GRR, OLH, OUE, Reports
from ldpkit.io import (
    _META,
    _digest,
    decoded_size,
    iter_reports_npz,
    reports_from_bytes,
    reports_to_bytes,
)


@pytest.mark.parametrize(
    "spec",
    [
        GRR(epsilon=1.0, domain_size=1000),
        OUE(epsilon=1.0, domain_size=37),
        OLH(epsilon=1.0, domain_size=64),
    ],
    ids=lambda s: type(s).__name__,
)
@pytest.mark.parametrize("batch_size", [1, 7, 100, 10_000])
def test_batches_concatenate_to_the_whole_file(spec, batch_size):
    reports = spec.randomize(np.arange(250) % spec.domain_size, rng=3)
    data = reports_to_bytes(reports)
    batches = list(iter_reports_npz(io.BytesIO(data), expected=spec, batch_size=batch_size))
    assert [len(b) for b in batches[:-1]] == [batch_size] * (len(batches) - 1)
    assert batches[0].concat(*batches[1:]).equals(reports_from_bytes(data))
    stats = spec.empty_stats().merge(*[spec.aggregate(b) for b in batches])
    np.testing.assert_array_equal(
        spec.estimate(stats).frequencies, spec.estimate(spec.aggregate(reports)).frequencies
    )


def _npz(arrays, meta):
    buf = io.BytesIO()
    np.savez_compressed(
        buf, **arrays, **{_META: np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)}
    )
    return buf.getvalue()


def test_fortran_ordered_and_empty_members():
    spec = OUE(epsilon=1.0, domain_size=20)
    reports = spec.randomize(np.arange(30) % 20, rng=0)
    bits = np.asfortranarray(reports.arrays["bits"])
    meta = {
        "mechanism": spec.to_dict(),
        "fingerprint": spec.fingerprint,
        "digest": _digest({"bits": bits}),
    }
    data = _npz({"bits": bits}, meta)
    got = list(iter_reports_npz(io.BytesIO(data), batch_size=8))
    assert got[0].concat(*got[1:]).equals(reports)
    empty = reports_to_bytes(reports[:0])
    (only,) = list(iter_reports_npz(io.BytesIO(empty)))
    assert len(only) == 0 and only.fields == ("bits",)


def test_damaged_files_raise_value_errors_before_any_batch():
    spec = GRR(epsilon=1.0, domain_size=1000)
    reports = spec.randomize(np.arange(5000) % 1000, rng=1)
    data = reports_to_bytes(reports)
    meta = {"mechanism": spec.to_dict(), "fingerprint": spec.fingerprint}
    values = reports.arrays["values"]
    cases = {
        "truncated": data[: len(data) // 2],
        "wrong digest": _npz({"values": values}, {**meta, "digest": "0" * 64}),
        "other rows": _npz(
            {"values": values[::-1].copy()}, {**meta, "digest": _digest({"values": values})}
        ),
        "ragged": _npz({"values": values, "more": values[:10]}, meta),
        "no arrays": _npz({}, meta),
        "no metadata": (lambda b: (np.savez(b, values=values), b.getvalue())[1])(io.BytesIO()),
        "objects": _npz({"values": np.array([None, 1], dtype=object)}, meta),
    }
    for what, body in cases.items():
        with pytest.raises(ValueError):
            list(iter_reports_npz(io.BytesIO(body), batch_size=100))
            pytest.fail(what)
    with pytest.raises(ValueError, match="reports must come from"):
        next(iter_reports_npz(io.BytesIO(data), expected=GRR(epsilon=1.3, domain_size=1000)))
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0xFF  # inside the compressed values
    with pytest.raises(ValueError):
        list(iter_reports_npz(io.BytesIO(bytes(flipped))))
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        iter_reports_npz(io.BytesIO(data), batch_size=0)
    # a huge metadata member is refused from its header
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf, zf.open(f"{_META}.npy", "w") as member:
        np.lib.format.write_array_header_1_0(
            member, {"descr": "|u1", "fortran_order": False, "shape": (2**31,)}
        )
    with pytest.raises(ValueError, match="corrupt ldpkit metadata"):
        next(iter_reports_npz(io.BytesIO(buf.getvalue())))


def _peak(fn):
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_is_bounded_by_one_batch():
    spec = GRR(epsilon=1.0, domain_size=1000)
    n = 4_000_000  # 8 MB of uint16 decoded, a few KB compressed
    data = reports_to_bytes(Reports(spec, values=np.zeros(n, dtype=np.uint16)))
    assert len(data) < 100_000 and decoded_size(data) >= 2 * n

    def streamed():
        stats = spec.empty_stats()
        for batch in iter_reports_npz(io.BytesIO(data), batch_size=65_536):
            stats = stats.merge(spec.aggregate(batch))
        assert stats.n == n

    whole = _peak(lambda: reports_from_bytes(data))
    assert whole > 2 * n  # the check below can fail: decoding whole costs the array
    assert _peak(streamed) < 2 * 2**20
