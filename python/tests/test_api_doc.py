"""docs/python-api.md is what scripts/python_api_doc.py makes of the docstrings now."""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_api_reference_is_up_to_date():
    made = subprocess.run([sys.executable, str(ROOT / "scripts" / "python_api_doc.py")], capture_output=True,
                          text=True, check=True).stdout
    committed = (ROOT / "docs" / "python-api.md").read_text()
    assert made == committed, "docs/python-api.md is stale: regenerate it with scripts/python_api_doc.py"
