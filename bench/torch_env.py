"""Shared by the bench scripts that compare against sentence-transformers on torch."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rerun_in_venv():
    """Re-runs this script inside .venv with numpy, torch and sentence-transformers (installed on
    first use by scripts/python-env.sh; IRON_VENV=DIR puts it elsewhere); returns in the re-run."""
    if os.environ.get("IRON_TORCH_BENCH_CHILD") == "1":
        return
    py = subprocess.run([os.path.join(ROOT, "scripts", "python-env.sh"), "numpy", "torch", "sentence-transformers"],
                        check=True, capture_output=True, text=True).stdout.strip()
    os.environ["IRON_TORCH_BENCH_CHILD"] = "1"
    os.execv(py, [py] + sys.argv)
