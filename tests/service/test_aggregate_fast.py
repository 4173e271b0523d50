"""The committer's fast aggregate of a group of small JSON batches (ReportRows ->
``spec._aggregate_decoded``) must give exactly ``spec.aggregate`` of the joined reports,
and refuse a bad report with the same message as the general path."""

import numpy as np
import pytest

from ldpkit import OLH, Reports, Stats
from ldpkit.frequency import FrequencyOracle
from ldpkit.service.commit import AggregationError, ReportRows, _aggregate_group, aggregate_one
from ldpkit.spec import mechanism_registry

FREQUENCY = sorted(k for k, v in mechanism_registry().items() if issubclass(v, FrequencyOracle))


def _rows(reports: Reports) -> list[ReportRows]:
    # what the JSON fast path hands the committer: one ReportRows per one-report batch
    return [
        ReportRows(
            {k: v[i : i + 1].tolist() for k, v in reports.arrays.items()},
            {k: v.dtype for k, v in reports.arrays.items()},
        )
        for i in range(len(reports))
    ]


def _same(a: Stats, b: Stats) -> bool:
    return (
        a.n == b.n
        and a.spec == b.spec
        and a.fields == b.fields
        and all(
            a.arrays[k].dtype == b.arrays[k].dtype
            and a.arrays[k].shape == b.arrays[k].shape
            and np.array_equal(a.arrays[k], b.arrays[k])
            for k in a.fields
        )
    )


@pytest.mark.parametrize("name", FREQUENCY)
@pytest.mark.parametrize("n", [1, 7, 40])
def test_group_aggregate_equals_spec_aggregate(name, n):
    spec = mechanism_registry()[name](epsilon=1.0, domain_size=12)
    reports = spec.randomize(np.arange(n) % 12, rng=n)
    got = _aggregate_group(spec, _rows(reports))
    assert _same(got, spec.aggregate(reports))
    assert got == spec.aggregate(reports)
    # and not just any Stats: one report less differs
    if n > 1:
        assert not _same(got, spec.aggregate(reports[1:]))
    assert not any(v.flags.writeable for v in got.arrays.values())


def test_bad_report_is_refused_with_the_general_message():
    spec = OLH(epsilon=1.0, domain_size=64)
    reports = spec.randomize(np.arange(7), rng=3)
    rows = _rows(reports)
    # fits the field's dtype (uint8, as the decoder checks) but not the hash range
    rows[4].columns["values"] = [spec.range_size]
    with pytest.raises(AggregationError) as fast:
        _aggregate_group(spec, rows)
    with pytest.raises(AggregationError) as slow:
        aggregate_one(spec, rows[4])
    assert str(fast.value) == str(slow.value)
    assert f"[0, {spec.range_size})" in str(fast.value)
    rows[4].columns["values"] = [spec.range_size - 1]  # the same group, now fine
    _aggregate_group(spec, rows)


@pytest.mark.parametrize(
    "arrays",
    [
        {"seeds": np.zeros(2, np.uint64), "values": np.zeros(2, np.float64)},  # float field
        {"seeds": np.zeros(2, np.uint64), "values": np.zeros(3, np.uint8)},  # ragged
        {"seeds": np.zeros(2, np.uint64)},  # missing field
        {"seeds": np.zeros(2, np.int64), "values": np.zeros(2, np.uint8)},  # seeds dtype
    ],
)
def test_decoded_aggregate_refuses_what_aggregate_refuses(arrays):
    spec = OLH(epsilon=1.0, domain_size=16)
    with pytest.raises((TypeError, ValueError)) as fast:
        spec._aggregate_decoded(dict(arrays))
    with pytest.raises((TypeError, ValueError)) as slow:
        spec.aggregate(Reports(spec, **arrays))
    assert type(fast.value) is type(slow.value) and str(fast.value) == str(slow.value)


def test_committer_finds_the_bad_batch_and_keeps_the_others(tmp_path):
    from ldpkit.service.app import create_app
    from ldpkit.service.store import PendingBatch

    spec = OLH(epsilon=1.0, domain_size=64)
    app = create_app({"o": spec}, f"sqlite:///{tmp_path}/x.db", metrics_dir=str(tmp_path))
    committer = app.state.collector.committer
    reports = spec.randomize(np.arange(5), rng=1)
    rows = _rows(reports)
    rows[2].columns["values"] = [255]
    items = [PendingBatch("o", 1, reports=r) for r in rows]
    errors, shared = committer._aggregate_small(items)
    assert list(errors) == [2] and not shared
    assert "reports rejected by" in str(errors[2])
    for i in (0, 1, 3, 4):
        assert items[i].stats == spec.aggregate(reports[i : i + 1])
