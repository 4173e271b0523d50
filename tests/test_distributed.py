import dask
import dask.bag as db
import numpy as np
import pytest

import ldpkit.distributed as dist
from ldpkit import GRR, OLH, OUE, SHE
from ldpkit.distributed import aggregate_dask
from ldpkit.io import save_reports, save_reports_parquet

SPECS = [
    GRR(epsilon=1.0, domain_size=40),
    OUE(epsilon=1.0, domain_size=100),
    OLH(epsilon=2.0, domain_size=500),
    SHE(epsilon=1.0, domain_size=8),
]


def _batches(spec, k=7, seed=0):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 400, size=k)
    return [spec.randomize(rng.integers(0, spec.domain_size, size=m), rng=rng) for m in sizes]


def _offline(spec, batches):
    return spec.aggregate(batches[0].concat(*batches[1:]))


@pytest.mark.parametrize("scheduler", ["synchronous", "threads"])
@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_equals_single_process_aggregate_exactly(spec, scheduler):
    batches = _batches(spec)
    expected = _offline(spec, batches)
    for split_every in (2, 3, 8):
        got = aggregate_dask(spec, batches, scheduler=scheduler, split_every=split_every)
        assert got == expected  # Stats equality: same spec, same n, identical arrays
        est, ref = spec.estimate(got), spec.estimate(expected)
        np.testing.assert_array_equal(est.frequencies, ref.frequencies)
        np.testing.assert_array_equal(est.variance, ref.variance)


def test_paths_bags_delayed_and_stats_give_the_same_result(tmp_path):
    spec = OUE(epsilon=1.0, domain_size=100)
    batches = _batches(spec, k=6)
    expected = _offline(spec, batches)
    paths = [
        save_reports_parquet(b, tmp_path / f"b{i}.parquet", row_group_size=50)
        if i % 2
        else save_reports(b, tmp_path / f"b{i}.npz")
        for i, b in enumerate(batches)
    ]
    assert aggregate_dask(spec, paths, scheduler="threads") == expected
    assert (
        aggregate_dask(spec, [str(p) for p in paths], scheduler="synchronous", batch_size=33)
        == expected
    )
    bag = db.from_sequence(batches, npartitions=4)
    assert aggregate_dask(spec, bag, scheduler="synchronous", split_every=2) == expected
    lazy = [dask.delayed(lambda b: b)(b) for b in batches]
    assert aggregate_dask(spec, lazy, scheduler="threads") == expected
    mixed = [spec.aggregate(batches[0]), batches[1], paths[2], *lazy[3:]]
    assert aggregate_dask(spec, mixed, scheduler="synchronous") == expected
    # A single element works too, and compute=False gives a lazy Dask object.
    assert aggregate_dask(spec, paths[1], scheduler="synchronous") == spec.aggregate(batches[1])
    item = aggregate_dask(spec, batches, compute=False)
    assert item.compute(scheduler="synchronous") == expected


def test_reduction_is_a_tree(monkeypatch):
    spec = GRR(epsilon=1.0, domain_size=5)
    batches = _batches(spec, k=8)
    sizes = []
    real = dist._merge_all

    def spy(spec_, stats):
        stats = list(stats)
        sizes.append(len(stats))
        return real(spec_, stats)

    monkeypatch.setattr(dist, "_merge_all", spy)
    got = aggregate_dask(spec, batches, scheduler="synchronous", split_every=2)
    assert got == _offline(spec, batches)
    # One merge of one element per partition, then 8 partitions merged pairwise:
    # 4 + 2 + 1 merges, none of which sees more than 2 inputs.
    assert sorted(sizes) == [1] * 8 + [2] * 7


def test_empty_input_and_bad_input():
    spec = GRR(epsilon=1.0, domain_size=5)
    empty = aggregate_dask(spec, [], scheduler="synchronous")
    assert empty == spec.empty_stats() and empty.n == 0
    with pytest.raises(ValueError, match="reports must come from GRR"):
        aggregate_dask(
            spec, [GRR(epsilon=2.0, domain_size=5).randomize([1], rng=0)], scheduler="synchronous"
        )
    with pytest.raises(ValueError, match="stats must come from GRR"):
        aggregate_dask(
            spec, [GRR(epsilon=2.0, domain_size=5).empty_stats()], scheduler="synchronous"
        )
    with pytest.raises(TypeError, match="partition elements must be ldpkit.Reports"):
        aggregate_dask(spec, [np.arange(3)], scheduler="synchronous")
    with pytest.raises(ValueError, match="split_every must be an integer >= 2"):
        aggregate_dask(spec, [], split_every=1)
    with pytest.raises(TypeError, match="spec must be an ldpkit mechanism spec"):
        aggregate_dask("GRR", [])
    with pytest.raises(TypeError, match="partitions must be a list"):
        aggregate_dask(spec, 3)


def test_fsspec_urls_and_arrow_tables(tmp_path):
    import fsspec

    from ldpkit.io import reports_to_arrow, reports_to_bytes

    spec = OLH(epsilon=1.0, domain_size=64)
    batches = _batches(spec, k=4, seed=5)
    expected = _offline(spec, batches)
    save_reports_parquet(batches[0], tmp_path / "a.parquet", row_group_size=40)
    save_reports(batches[1], tmp_path / "b.npz")
    mem = fsspec.filesystem("memory")
    mem.pipe("/ldpkit-test/c.parquet", reports_to_bytes(batches[2], format="parquet"))
    items = [
        (tmp_path / "a.parquet").as_uri(),  # file://
        f"file://{tmp_path / 'b.npz'}",
        "memory://ldpkit-test/c.parquet",
        reports_to_arrow(batches[3]),
    ]
    try:
        assert aggregate_dask(spec, items, scheduler="threads", batch_size=17) == expected
        other = OLH(epsilon=2.0, domain_size=64)
        with pytest.raises(ValueError, match="reports must come from"):
            aggregate_dask(other, items[:1], scheduler="synchronous")
    finally:
        mem.rm("/ldpkit-test", recursive=True)


def test_dataframes_are_refused_with_type_error():
    import dask.dataframe as dd
    import pandas as pd

    spec = GRR(epsilon=1.0, domain_size=4)
    frame = pd.DataFrame({"values": np.array([0, 1, 2], dtype=np.uint8)})
    for bad in (frame, dd.from_pandas(frame, npartitions=1), [frame]):
        with pytest.raises(TypeError, match="DataFrame has no spec or fingerprint"):
            aggregate_dask(spec, bad, scheduler="synchronous")


def test_on_a_real_local_cluster(tmp_path):
    from distributed import Client, LocalCluster

    spec = OUE(epsilon=1.0, domain_size=100)
    batches = _batches(spec, k=6, seed=9)
    urls = [
        save_reports_parquet(b, tmp_path / f"p{i}.parquet", row_group_size=64).as_uri()
        for i, b in enumerate(batches)
    ]
    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        # scheduler=None: Dask's default, i.e. the active distributed Client
        got = aggregate_dask(spec, urls, split_every=2)
        assert got == _offline(spec, batches)
        lazy = aggregate_dask(spec, urls, compute=False)
        assert client.compute(lazy).result() == got
