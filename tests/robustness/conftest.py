r"""Hypothesis profiles of the robustness suite, chosen with the environment
variable ``TGH_HYPOTHESIS_PROFILE``: ``ci`` (default, a few examples per
property, seconds) or ``full`` (at least 200 examples per property)."""
import os

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow,
                                      HealthCheck.data_too_large])
settings.register_profile('ci', max_examples=8, derandomize=True, **_COMMON)
settings.register_profile('full', max_examples=200, **_COMMON)
settings.load_profile(os.environ.get('TGH_HYPOTHESIS_PROFILE', 'ci'))
