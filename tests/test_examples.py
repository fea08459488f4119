import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_quickstart_runs():
    res = subprocess.run([sys.executable, str(ROOT / "examples" / "quickstart.py")], capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "forgot it" in res.stdout and "committed=True" in res.stdout


def test_revocation_event_schema_in_docs_is_current():
    import json

    from unsee import RevocationEvent

    doc = json.loads((ROOT / "docs" / "revocation-event.schema.json").read_text())
    assert doc == json.loads(json.dumps(RevocationEvent.model_json_schema()))
