"""The CLI answers bad options and configs with one line and exit status 2."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from ldpkit.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (["--port", "70000"], "Error: --port must be an integer in [1, 65535], got 70000"),
        (["--port", "0"], "Error: --port must be an integer in [1, 65535], got 0"),
        (["--workers", "0"], "Error: --workers must be an integer >= 1, got 0"),
    ],
)
def test_serve_rejects_bad_options_in_one_line(tmp_path, args, start):
    config = tmp_path / "c.toml"
    config.write_text('[collections.a]\nmechanism = "GRR"\nparams = {epsilon = 1.0}\n')
    result = runner.invoke(app, ["serve", str(config), *args])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and line.startswith(start), line


def test_serve_missing_or_bad_config_is_one_line(tmp_path):
    result = runner.invoke(app, ["serve", str(tmp_path / "missing.toml")])
    assert result.exit_code == 2
    line = result.output.strip()
    assert "\n" not in line and "config must be an existing TOML or JSON file" in line, line
    bad = tmp_path / "bad.toml"
    bad.write_text("this is = = not toml")
    result = runner.invoke(app, ["serve", str(bad)])
    assert result.exit_code == 2 and result.output.strip().startswith("Error:"), result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "start"),
    [
        (["demo", "--users", "1.5"], "Error: Invalid value for '--users'"),
        (["demo", "--users", "0"], "Error: --users must be an integer >= 1, got 0"),
        (["demo", "--epsilon", "nan"], "Error: --epsilon must be a finite number"),
        (["demo", "--nosuch"], "Error: No such option: --nosuch"),
        (["reproduce", "nope"], "Error: paper must be one of"),
        (["reproduce", "sw20", "--seed", "-1"], "Error: --seed must be an integer >= 0"),
        (["reproduce", "sw20", "--jobs", "0"], "Error: --jobs must be an integer >= 1"),
        (["serve"], "Error: Missing argument 'config'"),
        (["serve", "x.toml", "--port", "abc"], "Error: Invalid value for '--port'"),
    ],
)
def test_console_entry_point_answers_bad_input_in_one_line(args, start, capsys):
    """The installed `ldpkit` script (ldpkit.cli:main): usage errors too are one line, exit 2."""
    from ldpkit.cli import main

    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code == 2
    out = capsys.readouterr()
    text = (out.out + out.err).strip()
    assert text.startswith(start), text
    assert len(text.splitlines()) == 1, text
