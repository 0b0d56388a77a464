"""How the processes sharing a metadata store learn that a key changed (created, revoked) before their next
request, without a database or network round trip per request.

* ``FileStamp`` (embedded mode: one server and the ``orchard keys`` command on one data directory): the process
  that changes a key writes new bytes into ``<data_dir>/keys.stamp``, which every process has mapped in
  memory; every request compares them with the last seen (a memory read).
* ``RedisKeySync`` (scaled-out mode: replicas share PostgreSQL and Redis): a subscriber thread per process
  listens on ``<queue name>:keys``; on a message it reloads the key ring and adds its id to the message's
  acknowledgement set. The changing process publishes, then waits (up to ``ack_timeout``) until as many
  processes acknowledged as Redis delivered the message to: when ``DELETE /v1/keys/{id}`` answers, every
  replica has dropped the key. While the subscription is down a replica reads keys from the database per
  request (``live`` false) and reloads everything when it is back.
"""

from __future__ import annotations

import logging
import mmap
import os
import threading
import time
import uuid
from pathlib import Path

log = logging.getLogger("orchard.auth")


class FileStamp:
    """8 bytes in ``<data_dir>/keys.stamp``, mapped into every process (MAP_SHARED: one page of the page cache):
    a change writes new random bytes, a request compares them with the last seen (a memory read, no system
    call: a ``stat`` per request cost more than the rest of the key check)."""

    live = True

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / "keys.stamp"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(fd).st_size < 8:
                os.ftruncate(fd, 8)  # zeros; a concurrent first start does the same, harmlessly
            self._mm = mmap.mmap(fd, 8)
        finally:
            os.close(fd)
        self._seen = self._mm[:8]

    def changed(self) -> bool:
        now = self._mm[:8]
        if now == self._seen:
            return False
        self._seen = now
        return True

    def notify(self) -> None:
        self._mm[:8] = os.urandom(8)
        self._mm.flush()
        self._seen = self._mm[:8]

    def close(self) -> None:
        self._mm.close()


class RedisKeySync:
    def __init__(self, url: str, prefix: str, on_change, *, ack_timeout: float = 5.0, socket_timeout: float = 5.0):
        import redis

        self.redis = redis.Redis.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=socket_timeout)
        self.channel = f"{prefix}:keys"
        self.on_change = on_change  # reloads the ring (from the database)
        self.ack_timeout = ack_timeout
        self.id = f"{os.uname().nodename}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.live = False
        self._stop = threading.Event()
        self._subscribed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="orchard-key-sync", daemon=True)

    def start(self, wait: float = 5.0) -> None:
        self._thread.start()
        self._subscribed.wait(wait)

    def changed(self) -> bool:
        return False  # the subscriber thread reloads the ring itself

    def notify(self) -> None:
        """Publish a change and wait until every subscribed process has reloaded."""
        nonce = uuid.uuid4().hex
        try:
            receivers = self.redis.publish(self.channel, nonce)
            deadline = time.monotonic() + self.ack_timeout
            ack = f"{self.channel}:ack:{nonce}"
            while self.redis.scard(ack) < receivers:
                if time.monotonic() > deadline:
                    log.warning("key change: %d of %d processes acknowledged within %.0f s", self.redis.scard(ack),
                                receivers, self.ack_timeout)
                    return
                time.sleep(0.005)
        except Exception as exc:  # noqa: BLE001 - the others read the database while they cannot subscribe
            log.warning("key change not published (%s): processes whose subscription is down read keys from "
                        "the database until it is back", exc)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            pubsub = None
            try:
                pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(self.channel)
                pubsub.get_message(timeout=1.0)  # the subscribe confirmation
                self.on_change()  # everything changed while not subscribed
                self.live = True
                self._subscribed.set()
                backoff = 0.1
                while not self._stop.is_set():
                    msg = pubsub.get_message(timeout=1.0)
                    if msg is None or msg.get("type") != "message":
                        continue
                    self.on_change()
                    ack = f"{self.channel}:ack:{msg['data'].decode()}"
                    self.redis.sadd(ack, self.id)
                    self.redis.expire(ack, 60)
            except Exception as exc:  # noqa: BLE001 - Redis away: database lookups until it is back
                if self.live:
                    log.warning("key change subscription lost (%s); keys are read from the database meanwhile", exc)
                self.live = False
                self._subscribed.set()
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            finally:
                if pubsub is not None:
                    try:
                        pubsub.close()
                    except Exception:  # noqa: BLE001
                        pass

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self.redis.close()


def make_sync(settings, on_change):
    if settings.queue_url:
        sync = RedisKeySync(settings.queue_url, settings.queue_name, on_change,
                            socket_timeout=settings.redis_socket_timeout)
        sync.start()
        return sync
    return FileStamp(settings.data_dir)
