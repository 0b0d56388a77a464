"""Per-key rate limits: a token bucket of ``rate`` tokens per second holding at most ``burst``.

In-process (``LocalBuckets``) in the embedded mode; shared by every replica through one Lua script in Redis
(``RedisBuckets``, the clock being Redis's) in the scaled-out mode. ``take(key)`` returns 0 when the request
may go on, else the seconds until a token is back (the 429's ``Retry-After``). Redis unreachable: requests are
let through (the limit protects capacity; refusing everything would turn a Redis failure into an outage), with
a warning at most once a minute.
"""

from __future__ import annotations

import logging
import math
import time

log = logging.getLogger("orchard.auth")


class LocalBuckets:
    def __init__(self, rate: float, burst: int):
        self.rate, self.burst = rate, float(burst)
        self._buckets: dict[str, list[float]] = {}

    def take(self, key: str) -> float:
        now = time.monotonic()
        b = self._buckets.get(key)
        if b is None:
            if len(self._buckets) > 100_000:  # bounded: full buckets of idle keys carry no information
                self._buckets.clear()
            b = self._buckets[key] = [self.burst, now]
        tokens = min(self.burst, b[0] + (now - b[1]) * self.rate)
        b[1] = now
        if tokens >= 1.0:
            b[0] = tokens - 1.0
            return 0.0
        b[0] = tokens
        return (1.0 - tokens) / self.rate


_LUA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local b = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(b[1]) or burst
local ts = tonumber(b[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = (1 - tokens) / rate
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return tostring(wait)
"""


class RedisBuckets:
    def __init__(self, url: str, prefix: str, rate: float, burst: int, socket_timeout: float = 1.0):
        import redis

        self.redis = redis.Redis.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)
        self.script = self.redis.register_script(_LUA)
        self.prefix = f"{prefix}:ratelimit:"
        self.rate, self.burst = rate, burst
        self._warned = 0.0

    def take(self, key: str) -> float:
        try:
            return float(self.script(keys=[self.prefix + key], args=[self.rate, self.burst]))
        except Exception as exc:  # noqa: BLE001 - fail open (module docstring)
            now = time.monotonic()
            if now - self._warned > 60:
                self._warned = now
                log.warning("rate limit not applied: Redis unreachable (%s)", exc)
            return 0.0


def make_limiter(settings):
    """None when ORCHARD_RATE_LIMIT_PER_S is 0 (the default: no limit)."""
    rate = settings.rate_limit_per_s
    if rate <= 0:
        return None
    burst = settings.rate_limit_burst or max(1, math.ceil(2 * rate))
    if settings.queue_url:
        return RedisBuckets(settings.queue_url, settings.queue_name, rate, burst)
    return LocalBuckets(rate, burst)


def retry_after(wait: float) -> str:
    return str(max(1, math.ceil(wait)))
