import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
STORIES = ROOT.parent / "shared" / "models" / "stories260K.gguf"


@pytest.fixture
def stories():
    """stories260K (../shared/models): skipped, naming the file, when it is absent, unless
    IRON_REQUIRE_SHARED=1 (scripts/test.sh where ../shared exists) makes that a failure."""
    if not STORIES.is_file():
        if os.environ.get("IRON_REQUIRE_SHARED") == "1":
            pytest.fail(f"{STORIES} is missing (IRON_REQUIRE_SHARED=1)")
        pytest.skip(f"{STORIES} is missing")
    return STORIES


MINILM = ROOT / "models" / "all-MiniLM-L6-v2"


@pytest.fixture
def minilm():
    """all-MiniLM-L6-v2 (models/, scripts/fetch-model.sh minilm): skipped, naming it, when absent."""
    if not (MINILM / "config.json").is_file():
        pytest.skip(f"{MINILM} is absent (scripts/fetch-model.sh minilm)")
    return MINILM
