"""Test configuration: a derandomized hypothesis profile for CI, a faster one locally."""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=30,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("CUVIL_HYPOTHESIS_PROFILE",
                                     "ci" if os.environ.get("CI") else "dev"))
