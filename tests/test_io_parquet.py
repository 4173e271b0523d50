import io
import json
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ldpkit import GRR, OLH, OUE, SHE
from ldpkit.frequency import ORACLES
from ldpkit.io import (
    PARQUET_META_KEY,
    decoded_size,
    iter_reports_parquet,
    load_reports,
    load_reports_parquet,
    reports_from_arrow,
    reports_from_bytes,
    reports_from_dict,
    reports_to_arrow,
    reports_to_bytes,
    reports_to_dict,
    save_reports,
    save_reports_parquet,
)

SPECS = {
    "GRR": GRR(epsilon=1.0, domain_size=300),  # uint16 values
    "OUE": OUE(epsilon=1.0, domain_size=21),  # 3 packed bytes per user, 3 padding bits
    "OLH": OLH(epsilon=2.0, domain_size=1000),  # uint64 seeds + values
    "SHE": SHE(epsilon=1.0, domain_size=5),  # float64 (n, 5)
}


def _reports(spec, n=2_000, seed=0):
    values = np.random.default_rng(seed).integers(0, spec.domain_size, size=n)
    return spec.randomize(values, rng=seed)


@pytest.mark.parametrize("name", list(SPECS))
def test_parquet_round_trip_is_exact(tmp_path, name):
    spec = SPECS[name]
    r = _reports(spec)
    path = save_reports_parquet(r, tmp_path / "r.parquet", row_group_size=700)
    back = load_reports_parquet(path, expected=spec)
    assert back.equals(r)
    assert {k: v.dtype for k, v in back.arrays.items()} == {k: v.dtype for k, v in r.arrays.items()}
    assert spec.aggregate(back) == spec.aggregate(r)
    # load_reports tells Parquet from npz by content; save_reports picks by suffix.
    assert load_reports(save_reports(r, tmp_path / "s.pq"), expected=spec).equals(r)
    assert pq.ParquetFile(tmp_path / "s.pq").metadata.num_rows == len(r)
    assert load_reports(save_reports(r, tmp_path / "s.npz"), expected=spec).equals(r)


@pytest.mark.parametrize("name", list(ORACLES))
def test_every_oracle_round_trips_through_both_byte_formats_and_json(name):
    spec = ORACLES[name](epsilon=1.0, domain_size=37)
    r = _reports(spec, n=300)
    for fmt in ("npz", "parquet"):
        assert reports_from_bytes(reports_to_bytes(r, format=fmt), expected=spec).equals(r)
    text = json.dumps(reports_to_dict(r))
    assert reports_from_dict(json.loads(text), expected=spec).equals(r)


def test_bits_are_one_fixed_size_binary_value_per_user(tmp_path):
    spec = SPECS["OUE"]
    r = _reports(spec, n=10)
    save_reports_parquet(r, tmp_path / "r.parquet")
    schema = pq.read_schema(tmp_path / "r.parquet")
    assert schema.field("bits").type == pa.binary(3)
    table = pq.read_table(tmp_path / "r.parquet")
    assert table.column("bits")[4].as_py() == r.bits[4].tobytes()
    meta = json.loads(schema.metadata[PARQUET_META_KEY])
    assert meta["fingerprint"] == spec.fingerprint and meta["mechanism"] == spec.to_dict()
    assert pq.read_schema(_write(SPECS["SHE"], tmp_path)).field("values").type == pa.list_(
        pa.float64(), 5
    )


def _write(spec, tmp_path, n=10):
    return save_reports_parquet(_reports(spec, n=n), tmp_path / f"{spec.name}.parquet")


@pytest.mark.parametrize("name", ["OUE", "OLH"])
def test_row_group_iteration_covers_the_file_in_order(tmp_path, name):
    spec = SPECS[name]
    r = _reports(spec, n=2_500)
    path = save_reports_parquet(r, tmp_path / "r.parquet", row_group_size=1_000)
    groups = list(iter_reports_parquet(path, expected=spec))
    assert [len(g) for g in groups] == [1_000, 1_000, 500]
    assert groups[0].concat(*groups[1:]).equals(r)
    batches = list(iter_reports_parquet(path, batch_size=600))
    assert [len(b) for b in batches] == [600] * 4 + [100]
    merged = spec.empty_stats().merge(*(spec.aggregate(b) for b in batches))
    assert merged == spec.aggregate(r)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        iter_reports_parquet(path, batch_size=0)


def test_default_row_groups_hold_about_64_mib():
    spec = OUE(epsilon=1.0, domain_size=2**16)  # 8 KiB per user
    r = _reports(spec, n=10)
    buf = io.BytesIO()
    save_reports_parquet(r, buf)
    assert pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata.row_group(0).num_rows == 10
    from ldpkit.io import _default_row_group

    assert _default_row_group(r) == 8192


def test_empty_reports_round_trip(tmp_path):
    for spec in SPECS.values():
        r = _reports(spec, n=5)[:0]
        back = load_reports_parquet(save_reports_parquet(r, tmp_path / "e.parquet"))
        assert back.equals(r) and len(back) == 0


def test_foreign_spec_is_rejected(tmp_path):
    r = _reports(SPECS["OLH"])
    path = save_reports_parquet(r, tmp_path / "r.parquet")
    other = OLH(epsilon=2.0, domain_size=1000, hash_range=9)
    with pytest.raises(
        ValueError,
        match=r"reports must come from OLH\(epsilon=2\.0, domain_size=1000, hash_range=9, mix_items=True\)",
    ):
        load_reports_parquet(path, expected=other)
    with pytest.raises(ValueError, match="reports must come from"):
        next(iter_reports_parquet(path, expected=GRR(epsilon=2.0, domain_size=1000)))
    with pytest.raises(ValueError, match="reports must come from"):
        reports_from_bytes(reports_to_bytes(r, format="parquet"), expected=other)
    with pytest.raises(ValueError, match="reports must come from"):
        reports_from_dict(reports_to_dict(r), expected=other)


def _with_meta(table, meta_bytes):
    buf = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(meta_bytes), buf)
    return buf.getvalue()


def test_corrupt_or_missing_metadata_is_a_clear_error():
    spec = SPECS["OUE"]
    table = reports_to_arrow(_reports(spec, n=20))
    meta = json.loads(table.schema.metadata[PARQUET_META_KEY])

    with pytest.raises(ValueError, match="must be an ldpkit reports Parquet file"):
        reports_from_bytes(_with_meta(table, {}))
    with pytest.raises(ValueError, match="corrupt ldpkit metadata"):
        reports_from_bytes(_with_meta(table, {PARQUET_META_KEY: b"{not json"}))
    tampered = {**meta, "fingerprint": "0123456789abcdef"}
    with pytest.raises(ValueError, match="fingerprint must match the mechanism OUE"):
        reports_from_bytes(_with_meta(table, {PARQUET_META_KEY: json.dumps(tampered).encode()}))
    # A spec edited in the metadata without its fingerprint is caught the same way.
    edited = {
        **meta,
        "mechanism": {"mechanism": "OUE", "params": {"epsilon": 4.0, "domain_size": 21}},
    }
    with pytest.raises(ValueError, match="fingerprint must match"):
        reports_from_bytes(_with_meta(table, {PARQUET_META_KEY: json.dumps(edited).encode()}))
    unknown = {**meta, "mechanism": {"mechanism": "Nope", "params": {}}}
    with pytest.raises(ValueError, match="valid ldpkit reports metadata.*mechanism must be one of"):
        reports_from_bytes(_with_meta(table, {PARQUET_META_KEY: json.dumps(unknown).encode()}))
    no_fields = {k: v for k, v in meta.items() if k != "fields"}
    with pytest.raises(ValueError, match="no report fields listed"):
        reports_from_bytes(_with_meta(table, {PARQUET_META_KEY: json.dumps(no_fields).encode()}))
    wrong_width = {**meta, "fields": {"bits": {"dtype": "|u1", "shape": [4], "arrow": "binary"}}}
    with pytest.raises(
        ValueError, match=r"reports.bits must be stored as Arrow fixed_size_binary\[4\]"
    ):
        reports_from_bytes(_with_meta(table, {PARQUET_META_KEY: json.dumps(wrong_width).encode()}))
    bad_dtype = {**meta, "fields": {"bits": {"dtype": "no-such-dtype", "shape": [3]}}}
    with pytest.raises(ValueError, match="corrupt ldpkit metadata for field 'bits'"):
        reports_from_bytes(_with_meta(table, {PARQUET_META_KEY: json.dumps(bad_dtype).encode()}))
    renamed = table.rename_columns(["other"]).replace_schema_metadata(table.schema.metadata)
    with pytest.raises(ValueError, match=r"must have columns \['bits'\], missing \['bits'\]"):
        reports_from_arrow(renamed)


def test_nulls_and_truncated_files_are_rejected():
    spec = SPECS["GRR"]
    table = reports_to_arrow(_reports(spec, n=20))
    holed = table.set_column(0, "values", pa.array([None, *range(19)], type=pa.uint16()))
    with pytest.raises(ValueError, match="reports.values must have no missing values, got 1"):
        reports_from_arrow(holed)
    data = reports_to_bytes(_reports(spec, n=20), format="parquet")
    with pytest.raises(ValueError, match="must be a Parquet file"):
        reports_from_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="must be npz .* or Parquet"):
        reports_from_bytes(b"hello world")
    npz = reports_to_bytes(_reports(spec, n=20), format="npz")
    with pytest.raises(ValueError, match="must be an ldpkit reports file"):
        reports_from_bytes(npz[:40])


def test_decoded_size_reads_declared_sizes_without_decoding():
    spec = OUE(epsilon=1.0, domain_size=800)  # 100 bytes per user
    r = _reports(spec, n=1_000)
    assert decoded_size(reports_to_bytes(r, format="npz")) >= 100_000
    assert decoded_size(reports_to_bytes(r, format="parquet")) >= 100_000
    assert decoded_size(b"{}") is None


def test_json_reports_for_small_clients():
    spec = SPECS["OLH"]
    r = _reports(spec, n=4)
    d = reports_to_dict(r)
    # Minimal form: no mechanism, no dtype/shape; dtypes come from a reference batch.
    small = {
        "fingerprint": spec.fingerprint,
        "arrays": {"seeds": [str(s) for s in r.seeds.tolist()], "values": r.values.tolist()},
    }
    dtypes = {k: v.dtype for k, v in r.arrays.items()}
    assert reports_from_dict(small, expected=spec, dtypes=dtypes).equals(r)
    with pytest.raises(ValueError, match="fingerprint 'abc'"):
        reports_from_dict({**small, "fingerprint": "abc"}, expected=spec)
    lossy = {**d, "arrays": {**d["arrays"], "values": {"dtype": "uint8", "data": [1.5, 0, 0, 0]}}}
    with pytest.raises(
        ValueError,
        match=r"reports.values must be a rectangular array of uint8, .*entry 1\.5 \(float\)",
    ):
        reports_from_dict(lossy)
    booleans = {
        **d,
        "arrays": {**d["arrays"], "values": {"dtype": "uint8", "data": [True, 0, 0, 0]}},
    }
    with pytest.raises(ValueError, match="reports.values must be"):
        reports_from_dict(booleans)
    overflow = {
        **d,
        "arrays": {**d["arrays"], "values": {"dtype": "uint8", "data": [256, 0, 0, 0]}},
    }
    with pytest.raises(ValueError, match="out of bounds"):
        reports_from_dict(overflow)
    ragged = {**d, "arrays": {"bits": {"dtype": "uint8", "data": [[1, 2], [3]]}}}
    with pytest.raises(ValueError, match="reports.bits must be a rectangular array"):
        reports_from_dict(ragged)
    with pytest.raises(ValueError, match="declared shape"):
        reports_from_dict(
            {**d, "arrays": {**d["arrays"], "values": {**d["arrays"]["values"], "shape": [5]}}}
        )
    with pytest.raises(ValueError, match="arrays must be a non-empty JSON object"):
        reports_from_dict({**d, "arrays": {}})
    with pytest.raises(TypeError, match="data must be a JSON object"):
        reports_from_dict([1, 2])


def test_decoded_size_sees_through_compression_and_lying_headers():
    # 150 000 identical uint16 values (eps = 40: P[any flip] ~ 2e-10): tiny compressed, 300 KB decoded.
    r = GRR(epsilon=40.0, domain_size=300).randomize(np.zeros(150_000, dtype=int), rng=0)
    for fmt in ("npz", "parquet"):
        data = reports_to_bytes(r, format=fmt)
        assert len(data) < 30_000 and decoded_size(data) >= 300_000
    # An npz whose array header claims 10^12 items is measured by the claim, not the zip size.
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf, zf.open("values.npy", "w") as fh:
        np.lib.format.write_array_header_1_0(
            fh, {"descr": "<u8", "fortran_order": False, "shape": (10**12,)}
        )
    assert decoded_size(buf.getvalue()) == 8 * 10**12
    with pytest.raises(ValueError, match="npz or Parquet reports payload"):
        decoded_size(reports_to_bytes(r, format="npz")[:100])
