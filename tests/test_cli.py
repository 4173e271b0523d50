import pytest
from typer.testing import CliRunner

from ldpkit.cli import app

runner = CliRunner()


@pytest.mark.slow
def test_demo_runs_on_real_data(tmp_path, monkeypatch):
    monkeypatch.setenv("LDPKIT_CACHE", str(tmp_path / "cache"))
    result = runner.invoke(
        app, ["demo", "--users", "50000", "--names", "64", "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    assert "James" in result.output and "95% CI coverage" in result.output
    assert (tmp_path / "names.png").stat().st_size > 10_000
    assert (tmp_path / "departures.png").stat().st_size > 10_000
    assert (tmp_path / "stream.png").stat().st_size > 10_000
    assert "90% quantile" in result.output


def test_reproduce_rejects_unknown_paper():
    result = runner.invoke(app, ["reproduce", "nope"])
    assert result.exit_code == 2
    assert "paper must be one of" in result.output


def test_demo_with_fewer_than_20_names(tmp_path, monkeypatch):
    """--names below the 20 rows of the summary table used to crash (top(20) of 5 items)."""
    import ldpkit.cli as cli

    monkeypatch.setenv("LDPKIT_CACHE", str(tmp_path / "cache"))
    # Only the categorical part is under test here; the other two tours run above.
    monkeypatch.setattr(cli, "_numerical_demo", lambda **_: None)
    monkeypatch.setattr(cli, "_stream_demo", lambda **_: None)
    result = runner.invoke(app, ["demo", "--users", "2000", "--names", "5", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Top 5 names by estimate" in result.output
    assert (tmp_path / "names.png").exists()


@pytest.mark.parametrize(
    ("args", "start", "end"),
    [
        (["--users", "0"], "--users must be an integer >= 1", "got 0"),
        (["--users", "-5"], "--users must be an integer >= 1", "got -5"),
        (["--names", "1"], "--names must be an integer >= 2", "got 1"),
        (["--epsilon", "nan"], "--epsilon must be a finite number", "got nan"),
        (["--epsilon", "0"], "--epsilon must be a finite number", "got 0.0"),
        (["--epsilon", "-inf"], "--epsilon must be a finite number", "got -inf"),
    ],
)
def test_demo_rejects_bad_options_in_one_line(args, start, end):
    result = runner.invoke(app, ["demo", *args])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and line.startswith(f"Error: {start}") and line.endswith(end), line
