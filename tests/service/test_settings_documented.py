from pathlib import Path

from service.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_setting_is_in_the_readme_configuration_table():
    text = README.read_text()
    missing = [f"ORCHARD_{name.upper()}" for name in Settings.model_fields if f"`ORCHARD_{name.upper()}`" not in text]
    assert not missing, f"README configuration table lacks {missing}"
