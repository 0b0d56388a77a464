"""The service's layers, checked on its source: services/ free of the API layer and the web framework's
request, request bodies read in api/body.py only, the app's state read in api/deps.py (and runtime.rt) only.
Import cycles: tests/test_import_cycles.py."""

from pathlib import Path

import service

ROOT = Path(service.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = ["service", *path.relative_to(ROOT).with_suffix("").parts]
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _source_lines(prefix: str, needle: str) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{i}" for name, path in MODULES.items() if name.startswith(prefix)
            for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line]


def test_services_do_not_depend_on_the_api_layer_or_the_request():
    for needle in ("from ..api", "from service.api", "starlette.requests", "from fastapi"):
        assert _source_lines("service.services", needle) == [], needle


def test_bodies_are_read_in_body_py_and_app_state_in_deps_py():
    for needle in ("request.body()", "request.stream()", "request.form()"):
        assert {line.partition(":")[0] for line in _source_lines("service.api", needle)} <= {"api/body.py"}, needle
        assert _source_lines("service.services", needle) == [], needle
    assert {line.partition(":")[0] for line in _source_lines("service", "app.state.")} <= {
        "api/deps.py", "runtime.py", "app.py"}  # app.py sets it
