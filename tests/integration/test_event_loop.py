"""The event loop never stalls: `/health/live` answers within 50 ms at the 99th percentile while a real server
loads a 150 MB cold model and while it predicts 100,000 rows (issue 21; docs/decisions/model-cache.md).

On the event loop, the cold load and the predict (seconds each) held every probe for their whole length. Off it,
a probe still waited for the worker thread to hand over the GIL: tens of milliseconds while it decoded a 16 MB
body, converted its nested lists or copied a bundle's bytes. Now the large body is decoded, converted and encoded
a piece at a time, the bundle is read and verified without a copy, and `orchard serve` asks for the GIL to be
handed over every millisecond. The probes' 99th percentile is taken over all the probes of a phase (three
100,000-row predicts, ~300 probes or more), with the server and the prober at raised priority where permitted
(bench/event_loop.py: the same scenario, which prints the figures)."""

import numpy as np
import pytest

from bench.event_loop import scenario

pytestmark = pytest.mark.slow
P99_BOUND = 0.050  # seconds (issue 21); a stalled loop held probes for the whole phase (seconds)


def test_health_answers_within_50_ms_during_a_cold_load_and_large_predicts(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    phases = scenario(data)
    for phase in ("cold load", "100,000-row predict"):
        seconds, latencies = phases[phase]
        # long enough that a stalled loop would show, and probes ran throughout it
        assert seconds > 0.3 and len(latencies) >= 50, (phase, seconds, len(latencies))
        p99 = float(np.percentile(latencies, 99))
        assert p99 < P99_BOUND, (phase, f"p99 {p99 * 1000:.1f} ms", "idle p99 "
                                 f"{float(np.percentile(phases['idle'][1], 99)) * 1000:.1f} ms",
                                 sorted(latencies)[-5:])
