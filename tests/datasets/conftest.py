"""Every data set test reads and writes its Parquet cache in one temporary directory."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory: pytest.TempPathFactory):
    # One cache per session: each real data set is parsed once, then read from Parquet.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LDPKIT_CACHE", str(tmp_path_factory.mktemp("ldpkit-cache")))
        yield
