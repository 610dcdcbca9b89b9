"""What every test shares: the clock (``now``) and the hypothesis profiles.

Profiles (``--hypothesis-profile NAME`` or ``CP_HYPOTHESIS_PROFILE``): ``default`` (150
random examples per property, new ones each run), ``ci`` (the same 150 on every run, what
.ci/run uses: a red CI is the change's doing, and reruns the same), ``quick`` (25, while
editing), ``thorough`` (1,500, before a release or after touching the solvers).
Deadlines are off everywhere: a solver call may take a second on a loaded machine, and
speed is the benchmarks' job.
"""

from __future__ import annotations

import os
from datetime import datetime

import pytest
from hypothesis import HealthCheck, settings

from tests.builders import NOW

_COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("default", max_examples=150, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("ci", max_examples=150, derandomize=True, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("quick", max_examples=25, **_COMMON)  # type: ignore[arg-type]
settings.register_profile("thorough", max_examples=1500, **_COMMON)  # type: ignore[arg-type]
settings.load_profile(os.environ.get("CP_HYPOTHESIS_PROFILE", "default"))


@pytest.fixture
def now() -> datetime:
    """The tests' fixed clock (2026-11-22T10:00Z): plans are functions of time."""
    return NOW
