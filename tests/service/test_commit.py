"""The group committer's scheduling: group sizes and the wait before a group, without
timed assertions (a wrong wait shows up as a group split in two, or as a commit that
cannot finish within a generous bound while the window is minutes long)."""

import asyncio

import numpy as np

from ldpkit import GRR
from ldpkit.service.commit import GroupCommitter
from ldpkit.service.store import CollectorStore, PendingBatch

SPEC = GRR(epsilon=1.0, domain_size=8)


def _item(v):
    stats = SPEC.aggregate(SPEC.randomize(np.array([v % 8]), rng=v))
    return PendingBatch("c", 1, stats=stats)


def test_lone_batches_do_not_wait_and_full_groups_go_at_once(tmp_path):
    store = CollectorStore(f"sqlite:///{tmp_path / 'c.db'}")
    store.register("c", SPEC)
    sizes: list[int] = []
    # A window of 10 minutes: any group that waited for it would time the test out.
    committer = GroupCommitter(
        store, {"c": SPEC}, window=600.0, on_commit=lambda _s, n: sizes.append(n)
    )

    async def run():
        # A lone batch after a quiet spell goes at once (the expected group size is 1).
        await asyncio.wait_for(committer.commit(_item(0)), 60)
        # Eight at once, twice: each round is one group of eight; the second round waits
        # for all eight (the size recent groups had), and no longer once they are in.
        for r in range(2):
            await asyncio.wait_for(
                asyncio.gather(*(committer.commit(_item(8 * r + i)) for i in range(8))), 60
            )
        await committer.close()

    try:
        asyncio.run(run())
        assert sizes == [1, 8, 8]
        assert store.summary("c") == (17, 17)
        assert not store.needs_compaction  # close() folded the parts
    finally:
        store.close()
