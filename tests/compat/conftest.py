"""The compatibility suite's cases reuse the agent shapes of the forget tests (tests/forget)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "forget"))
