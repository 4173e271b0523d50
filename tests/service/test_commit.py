"""The group committer's scheduling: group sizes and the wait before a group, without
timed assertions (a wrong wait shows up as a group split in two, or as a commit that
cannot finish within a generous bound while the window is minutes long)."""

import asyncio
import re

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


def _recording_compactions(store):
    """Wrap ``store.compaction.try_compact``: the names of the threads that ran it, in order."""
    import threading

    threads: list[str] = []
    original = store.compaction.try_compact

    def try_compact(**kwargs):
        threads.append(threading.current_thread().name)
        return original(**kwargs)

    store.compaction.try_compact = try_compact
    return threads


def test_sqlite_compacts_in_the_loop_thread_unless_a_transaction_was_slow(tmp_path):
    """On SQLite the committer folds roll-up parts in its loop's thread between groups (a
    helper thread fought the busy loop for the interpreter lock while no group could
    commit); after a slow transaction (a stalled disk) it moves them off the loop."""
    import threading

    store = CollectorStore(f"sqlite:///{tmp_path / 'c.db'}")
    store.register("c", SPEC)
    committer = GroupCommitter(store, {"c": SPEC}, window=0.0, compact_interval=0.0)
    threads = _recording_compactions(store)

    async def run(first):
        for i in range(3):  # each group writes a part; the next turn folds it
            await asyncio.wait_for(committer.commit(_item(first + i)), 60)
            await asyncio.sleep(0.01)
        return threading.current_thread().name

    try:
        loop_thread = asyncio.run(run(0))
        on_loop = list(threads)
        assert on_loop and set(on_loop) == {loop_thread}
        del threads[:]
        # as after a commit over slow_commit_seconds
        store.loop_guard.off_loop_until = float("inf")
        asyncio.run(run(3))
        assert threads and loop_thread not in threads
        asyncio.run(committer.close())
        assert store.summary("c") == (6, 6)
    finally:
        store.close()


def test_freeze_gc_freezes_while_serving_and_main_sets_it(tmp_path, monkeypatch):
    import gc

    import pytest
    import uvicorn
    from fastapi.testclient import TestClient

    from ldpkit.service import create_app, main

    with pytest.raises(TypeError, match="freeze_gc"):
        create_app(SPEC, f"sqlite:///{tmp_path / 'x.db'}", freeze_gc=1)
    assert gc.get_freeze_count() == 0
    served = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_kw: served.append(app))
    config = {
        "database_url": f"sqlite:///{tmp_path / 'c.db'}",
        "collections": {"c": {"mechanism": "GRR", "params": SPEC.to_dict()["params"]}},
    }
    main(config, port=8123)
    with TestClient(served[0]) as client:
        assert client.get("/healthz").status_code == 200
        assert gc.get_freeze_count() > 0  # everything alive at start-up
    assert gc.get_freeze_count() == 0  # unfrozen at shutdown
    with TestClient(create_app(SPEC, f"sqlite:///{tmp_path / 'd.db'}")):
        assert gc.get_freeze_count() == 0  # off by default


def test_loop_stall_summary_when_asked(tmp_path, monkeypatch, caplog):
    """LDPKIT_DEBUG_LOOP_STALLS=<ms>: a blocking call on the loop is counted as a stall
    and summed up at shutdown; a bad value is refused; unset, nothing is logged."""
    import logging
    import time

    import pytest
    from fastapi.testclient import TestClient

    from ldpkit.service import create_app

    monkeypatch.setenv("LDPKIT_DEBUG_LOOP_STALLS", "5")
    app = create_app(SPEC, f"sqlite:///{tmp_path / 'c.db'}")

    @app.get("/block")
    async def block() -> dict:
        time.sleep(0.05)  # blocks the event loop 50 ms
        return {}

    with caplog.at_level(logging.WARNING, logger="ldpkit.service.stalls"):
        with TestClient(app) as client:
            client.get("/block")
            time.sleep(0.05)  # the watcher wakes (late) and counts it
    lines = [r.getMessage() for r in caplog.records if "loop stalls" in r.getMessage()]
    assert len(lines) == 1
    n, longest = re.search(r"loop stalls > 5 ms: (\d+) \(max ([\d.]+) ms", lines[0]).groups()
    assert int(n) >= 1 and float(longest) >= 45
    monkeypatch.setenv("LDPKIT_DEBUG_LOOP_STALLS", "soon")
    with pytest.raises(ValueError, match="LDPKIT_DEBUG_LOOP_STALLS"):
        with TestClient(create_app(SPEC, f"sqlite:///{tmp_path / 'd.db'}")):
            pass
    monkeypatch.delenv("LDPKIT_DEBUG_LOOP_STALLS")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ldpkit.service.stalls"):
        with TestClient(create_app(SPEC, f"sqlite:///{tmp_path / 'e.db'}")):
            pass
    assert not [r for r in caplog.records if "loop stalls" in r.getMessage()]
