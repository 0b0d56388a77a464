"""The event loop never stalls: `/health/live` answers within 50 ms at the 99th percentile while a real server
loads a 150 MB cold model and while it predicts 100,000 rows, through /v1 and through /v2 infer as one JSON tensor
(issue 21; docs/decisions/model-cache.md).

On the event loop, the cold load and the predict (seconds each) held every probe for their whole length. Off it,
a probe still waited for the worker thread to hand over the GIL: tens of milliseconds while it decoded a 16 MB
body, converted its nested lists or copied a bundle's bytes. Now the large body is decoded, converted and encoded
a piece at a time, the bundle is read and verified without a copy, and `orchard serve` asks for the GIL to be
handed over every millisecond.

The 99th percentile is taken over every probe of a phase (three 100,000-row predicts: ~300 probes or more). What
a busy machine adds to any probe is not the server's stall: a second, idle server is probed at the same moments,
and the bound applies to the server's 99th percentile less the idle one's (on a quiet machine ~1 ms: the bound is
then the issue's 50 ms as it stands). bench/event_loop.py runs the same scenario and prints the figures."""

import numpy as np
import pytest

from bench.event_loop import scenario

pytestmark = pytest.mark.slow
P99_BOUND = 0.050  # seconds (issue 21); a stalled loop held probes for the whole phase (seconds)


def test_health_answers_within_50_ms_during_a_cold_load_and_large_predicts(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    phases = scenario(data)
    for phase in ("cold load", "100,000-row predict", "100,000-row /v2 infer"):
        seconds, latencies, control = phases[phase]
        # long enough that a stalled loop would show, and probes ran throughout it
        assert seconds > 0.3 and len(latencies) >= 50 and len(control) >= 50, (phase, seconds, len(latencies))
        p99, machine = float(np.percentile(latencies, 99)), float(np.percentile(control, 99))
        assert p99 - machine < P99_BOUND, (phase, f"p99 {p99 * 1000:.1f} ms", f"idle server's {machine * 1000:.1f} ms",
                                           sorted(latencies)[-5:])


def test_health_answers_within_50_ms_while_large_json_bodies_are_decoded_and_validated(tmp_path):
    """FastAPI decoded and validated a pydantic body on the event loop (~0.5 s for 16 MB); the dataset upload
    validated its JSON there too. Now both run on a worker thread, a piece at a time (api/body.py)."""
    from bench.event_loop import bodies_scenario

    data = tmp_path / "data"
    data.mkdir()
    phases = bodies_scenario(data, repeat=2)
    for phase in ("16 MB evaluate", "16 MB dataset upload"):
        seconds, latencies, control = phases[phase]
        assert seconds > 0.3 and len(latencies) >= 50 and len(control) >= 50, (phase, seconds, len(latencies))
        p99, machine = float(np.percentile(latencies, 99)), float(np.percentile(control, 99))
        assert p99 - machine < P99_BOUND, (phase, f"p99 {p99 * 1000:.1f} ms", f"idle server's {machine * 1000:.1f} ms",
                                           sorted(latencies)[-5:])
