"""Shared set-up of the Python checks: the fgl package from python/ and the op
library ctest names in $FGL_OPS_LIBRARY (else the repository's build)."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import fgl  # noqa: E402

fgl.load_library()

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def pytest_sessionstart(session):
    # Fresh data every run; the seed is printed so a failure can be replayed.
    seed = torch.seed()
    print(f"fgl python tests: torch seed {seed}")


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param
