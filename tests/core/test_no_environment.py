"""core/ reads no environment variable: its settings are parameters the caller (the service) passes."""

import re
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "core"


def test_core_reads_no_environment_variable():
    pattern = re.compile(r"\bos\.environ\b|\bgetenv\b|\benviron\.get\b")
    offenders = [f"{p.relative_to(CORE.parent)}:{i}" for p in sorted(CORE.rglob("*.py"))
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not offenders, offenders
