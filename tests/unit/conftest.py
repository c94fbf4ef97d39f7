"""Hypothesis profiles for the unit tests, chosen with `HYPOTHESIS_PROFILE`.

- `ci` (the default): deterministic draws (`derandomize`), so that a run is
  reproducible, and no deadline (the interpreter's speed varies by machine).
- `dev`: the same budgets with fresh random draws on every run.
- `thorough`: 15 times the examples, random; for hunting bugs locally:
  `HYPOTHESIS_PROFILE=thorough pytest tests/unit/test_pass_properties.py`.

Tests with their own budget scale it by the profile's `max_examples` relative
to hypothesis's default of 100 (`strategies.scaled_examples`).
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.register_profile("thorough", deadline=None, print_blob=True, max_examples=1500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
