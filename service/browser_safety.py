"""Browser safety: the ``Host`` allow-list (DNS rebinding) and the refusal of state-changing requests a web page
could send cross-site (a foreign ``Origin``, ``Sec-Fetch-Site: cross-site``, ``text/plain`` or form bodies).

``BrowserGuard.check(scope)`` raises a ``ProblemError`` for a request to refuse; ``BrowserGuardMiddleware``
answers it for every routed request, and the predict front door (api/fastpath.py), which skips the middleware
stack, makes the same one call. Clients that are not browsers (curl, SDKs) send neither ``Origin`` nor
``Sec-Fetch-Site``, so only the ``Host`` check applies to them. See docs/decisions/browser-safety.md.
"""

from __future__ import annotations

from .errors import ProblemError, error_response

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# the bodies an HTML form (or a no-CORS fetch) can send without a preflight; multipart is refused cross-site
# through Origin, and stays open to clients that send no Origin (curl -F)
_SIMPLE_TEXT_TYPES = frozenset({b"text/plain", b"application/x-www-form-urlencoded"})
_OK_CACHE_MAX = 256


def parse_list(value: str) -> list[str]:
    """``a, b ,c`` -> ["a", "b", "c"] (empty items dropped)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def host_name(host: str) -> str:
    """The name of a ``Host`` header value, port removed and lowercased: ``[::1]:8000`` -> ``[::1]``."""
    host = host.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        return host[: end + 1] if end > 0 else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


class BrowserGuard:
    def __init__(self, allowed_hosts: list[str], cors_origins: list[str]):
        names = [h.lower() for h in allowed_hosts]
        self.any_host = "*" in names
        self.exact = frozenset(n for n in names if not n.startswith("*."))
        self.suffixes = tuple(n[1:] for n in names if n.startswith("*."))  # ".example.com"
        self.any_origin = "*" in cors_origins
        self.origins = frozenset(o.rstrip("/").lower().encode() for o in cors_origins if o != "*")
        self._ok_hosts: set[bytes] = set()  # Host values already accepted: one set lookup per request

    def host_allowed(self, raw: bytes | None) -> bool:
        """Whether a ``Host`` value is allowed. A request without one (HTTP/1.0, an ASGI caller) is: browsers
        always send it, and DNS rebinding needs the page's own name in it."""
        if self.any_host or raw is None or raw in self._ok_hosts:
            return True
        name = host_name(raw.decode("latin-1"))
        ok = name in self.exact or any(name.endswith(s) or name == s[1:] for s in self.suffixes)
        if ok:
            if len(self._ok_hosts) >= _OK_CACHE_MAX:
                self._ok_hosts.clear()
            self._ok_hosts.add(raw)
        return ok

    def origin_allowed(self, origin: bytes, host: bytes | None) -> bool:
        """Same origin (the origin's host[:port] is the request's ``Host``) or one of ``ORCHARD_CORS_ORIGINS``."""
        origin = origin.strip().lower()
        if self.any_origin or origin in self.origins:
            return True
        _, sep, authority = origin.partition(b"://")
        return bool(sep) and host is not None and authority == host.strip().lower()

    def check(self, scope) -> None:
        """Raise a ProblemError (400, 403 or 415) when the request must be refused."""
        host = origin = site = ctype = None
        for k, v in scope["headers"]:
            if k == b"host":
                host = v
            elif k == b"origin":
                origin = v
            elif k == b"sec-fetch-site":
                site = v
            elif k == b"content-type":
                ctype = v
        if not self.host_allowed(host):
            shown = host.decode("latin-1")[:100] if host is not None else "(none)"
            raise ProblemError(f"Host {shown!r} is not allowed; add its name to ORCHARD_ALLOWED_HOSTS to serve it",
                               status=400, title="Bad Request")
        if scope["method"] in SAFE_METHODS:
            return
        if origin is not None:
            if not self.origin_allowed(origin, host):
                raise ProblemError(f"cross-origin request from {origin.decode('latin-1')[:100]!r} refused; "
                                   "add the origin to ORCHARD_CORS_ORIGINS to allow it", status=403,
                                   title="Forbidden")
        elif site == b"cross-site":
            raise ProblemError("cross-site request refused (Sec-Fetch-Site: cross-site); add the page's origin to "
                               "ORCHARD_CORS_ORIGINS to allow it", status=403, title="Forbidden")
        if ctype is not None and ctype != b"application/json" and (
                ctype.split(b";", 1)[0].strip().lower() in _SIMPLE_TEXT_TYPES):
            media = ctype.split(b";", 1)[0].strip().decode("latin-1")
            raise ProblemError(f"content type {media!r} is not accepted (a browser form could send it "
                               "cross-site); send application/json, text/csv, Parquet or multipart/form-data",
                               status=415, title="Unsupported Media Type")


class BrowserGuardMiddleware:
    """Pure ASGI middleware answering ``BrowserGuard.check``'s refusals (problem+json, or V2's shape)."""

    def __init__(self, app, guard: BrowserGuard):
        self.app = app
        self.guard = guard

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            try:
                self.guard.check(scope)
            except ProblemError as exc:
                return await error_response(scope.get("path", ""), exc)(scope, receive, send)
        return await self.app(scope, receive, send)
