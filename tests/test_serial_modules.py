"""The modules ``make test`` runs alone exist (a renamed one would run beside the others)."""

from pathlib import Path

from conftest import SERIAL_MODULES

ROOT = Path(__file__).resolve().parent.parent


def test_every_serial_module_exists():
    assert [m for m in SERIAL_MODULES if not (ROOT / m).is_file()] == []
