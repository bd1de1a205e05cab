"""Settings for every test."""

from hypothesis import HealthCheck, settings

# The properties are judged by what they assert, never by speed: on a loaded machine
# (two cores, other work beside) Hypothesis's own timing checks failed them for being slow.
settings.register_profile("vramtop", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("vramtop")
