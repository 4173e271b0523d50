"""Fixtures of the collector tests: a throwaway PostgreSQL server when one is installed."""

import pytest


@pytest.fixture(scope="session")
def postgres_url():
    """URL of a temporary PostgreSQL server (initdb + postgres from the installed package).

    Skips when no server binary or driver is installed, except in CI (``CI`` set), where
    the PostgreSQL tests must run (``.ci/run`` installs Debian's postgresql).
    """
    import os

    from ldpkit.service.pgtemp import TemporaryPostgres, find_pg_bin

    try:
        import psycopg  # noqa: F401
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("psycopg is not installed (pip install 'ldpkit[service]')")
    if find_pg_bin() is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL server binaries must be installed in CI (.ci/run)")
        pytest.skip("no PostgreSQL server binaries (Debian: apt-get install postgresql)")
    pg = TemporaryPostgres().start()
    try:
        yield pg.url
    finally:
        pg.stop()


@pytest.fixture
def fresh_postgres(postgres_url):
    """The session server with an empty schema (tables dropped before the test)."""
    from sqlalchemy import create_engine

    from ldpkit.service.store import metadata

    engine = create_engine(postgres_url)
    metadata.drop_all(engine)
    engine.dispose()
    return postgres_url
