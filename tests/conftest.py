"""Test configuration: a derandomized hypothesis profile for CI, a faster one locally,
and a compile cache of the test session's own (never the user's)."""

import os
import tempfile

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None, max_examples=30,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("CUVIL_HYPOTHESIS_PROFILE",
                                     "ci" if os.environ.get("CI") else "dev"))

# builds in the suite go to a fresh cache folder, so a user's cache neither serves
# nor receives them; tests of the cache itself point CUVIL_CACHE_DIR elsewhere
os.environ["CUVIL_CACHE_DIR"] = tempfile.mkdtemp(prefix="cuvil-test-cache-")
