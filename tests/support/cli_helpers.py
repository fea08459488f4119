"""Running the CLI in-process in tests, and what every CLI error must look like."""

from __future__ import annotations

from unsee.cli import main


def run(capsys, *argv) -> tuple[int, str, str]:
    """``unsee ARGV`` -> (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(err: str) -> str:
    """One ``error:`` line on stderr (with ``--json``: one JSON object), no traceback."""
    if err.startswith("{"):
        import json

        assert json.loads(err)["error"]["message"], err
    else:
        assert err.startswith("error: "), err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, f"error spans several lines: {err!r}"
    return err
