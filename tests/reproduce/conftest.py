"""Reproduction tests read and write the data-set cache in a temporary directory only."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", autouse=True)
def _temporary_cache(tmp_path_factory: pytest.TempPathFactory):
    # Never touch ~/.cache: the baby-names table is parsed once per module into a tmp cache.
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LDPKIT_CACHE", str(tmp_path_factory.mktemp("ldpkit-cache")))
        yield
