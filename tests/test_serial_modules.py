"""The modules ``make test`` runs alone exist (a renamed one would run beside the others)."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_every_serial_module_exists(request):
    # (the suite's conftest as pytest loaded it: ``import conftest`` may find another directory's)
    serial = next(p.SERIAL_MODULES for p in request.config.pluginmanager.get_plugins()
                  if hasattr(p, "SERIAL_MODULES"))
    assert serial and [m for m in serial if not (ROOT / m).is_file()] == []
