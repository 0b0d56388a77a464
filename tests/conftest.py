"""Settings of the whole test suite."""

import os

# Starlette's TestClient reaches the in-process apps as http://testserver: that name is allowed next to the
# loopback names (ORCHARD_ALLOWED_HOSTS), as Django's test runner adds it to ALLOWED_HOSTS. Servers started as
# subprocesses get an environment without ORCHARD_* variables, hence the default list.
os.environ.setdefault("ORCHARD_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
