from pathlib import Path

from service.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_in_the_readme_configuration_table():
    text = README.read_text()
    missing = [f"ORCHARD_{name.upper()}" for name in Settings.model_fields if f"`ORCHARD_{name.upper()}`" not in text]
    assert not missing, f"README configuration table lacks {missing}"


def test_every_orchard_variable_the_code_names_is_in_the_readme():
    """Variables read outside Settings (e.g. core's ORCHARD_HIST_WORKERS) must be documented too."""
    import re

    text = README.read_text()
    root = README.parent
    named = {m for pkg in ("core", "service") for p in (root / pkg).rglob("*.py")
             for m in re.findall(r"\bORCHARD_[A-Z][A-Z0-9_]*[A-Z0-9]\b", p.read_text())}
    missing = sorted(v for v in named if f"`{v}`" not in text)
    assert not missing, f"README configuration table lacks {missing}"
