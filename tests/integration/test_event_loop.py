"""The event loop never stalls: `/health/live` answers quickly while a real server loads a large cold model and
while it predicts 100,000 rows (docs/decisions/model-cache.md).

On the event loop, the cold load and the predict (seconds each) held every probe for their whole length; off
it, a probe waits at most for a GIL hand-off. The bound asserted here, 500 ms at the 99th percentile, leaves
room for a CI machine whose two cores also run other tests; the 50 ms target is measured on a quiet machine by
``python bench/event_loop.py`` (the same scenario)."""

import numpy as np
import pytest

from bench.event_loop import scenario

pytestmark = pytest.mark.slow
P99_BOUND = 0.5  # seconds: a stalled loop held probes for the whole phase (2 s and more here)


def test_health_answers_during_a_cold_load_and_a_large_predict(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    phases = scenario(data)
    for phase, (seconds, latencies) in phases.items():
        # long enough that a stalled loop would show, and probes ran throughout it
        assert seconds > 0.3 and len(latencies) >= 5, (phase, seconds, len(latencies))
        assert float(np.percentile(latencies, 99)) < P99_BOUND, (phase, sorted(latencies)[-3:])
