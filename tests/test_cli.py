from typer.testing import CliRunner

from ldpkit.cli import app

runner = CliRunner()


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
