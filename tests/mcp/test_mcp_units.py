"""``sr-dist-mcp --units``: the option's forms, its errors, and a session that checks units."""

from __future__ import annotations

from pathlib import Path

import pytest

from sr_dist.mcp_server import _Session, main, parse_options


def test_units_options() -> None:
    assert parse_options(["--dataset", "feynman:I.6.2"]).units is None
    assert parse_options(["--dataset", "feynman:I.6.2", "--units", "feynman"]).units == "feynman"
    pairs = parse_options(["--dataset", "d.csv", "--units", "x=m", "--units", "v = m/s"])
    assert pairs.units == {"x": "m", "v": "m/s"} and pairs.dimensionless_constants is True
    given = parse_options(["--dataset", "d.csv", "--units", '{"x": "m", "v": [1, -1, 0, 0, 0]}',
                           "--constants-with-units"])
    assert given.units == {"x": "m", "v": [1, -1, 0, 0, 0]}
    assert given.dimensionless_constants is False


def test_bad_units_exit_with_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse_options(["--dataset", "d.csv", "--units", "x:m"])
    assert exited.value.code == 2 and "--units takes NAME=UNIT" in capsys.readouterr().err
    assert main(["--dataset", "feynman:I.6.2", "--n", "50", "--units", "sigma=m",
                 "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("sr-dist-mcp: ") and "no unit for theta, f" in err


def test_a_session_with_units_reports_mismatches(tmp_path: Path) -> None:
    options = parse_options(["--dataset", "feynman:I.12.1", "--n", "200", "--units", "feynman",
                             "--results", str(tmp_path), "--run-id", "units"])
    session = _Session(options)
    try:
        session.next_step(1)
        result = session.tools["evaluate_formulas"](expressions=["mu*Nn", "mu + Nn"])
        good, bad = result.result["results"]
        assert good["dimensionally_consistent"] is True
        assert bad["units_mismatch"] == "mu + Nn adds dimensionless to kg*m/s**2"
    finally:
        session.close(interrupted=False)
