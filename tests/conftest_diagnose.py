"""The planted quantization-hostile digits model (reference_models.planted_outlier), built once."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def planted(session_tmp: Path) -> dict:
    from reference_models.planted_outlier import build_planted

    return build_planted(session_tmp / "planted")
