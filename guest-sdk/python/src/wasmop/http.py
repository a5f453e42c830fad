"""Outgoing HTTP for the handlers that may reach outside the cluster (``fetch``, ``fetch_all``,
``apply_external``, ``delete_external``), over ``wasi:http``: the host sends the request if the
plugin's :class:`~wasmop.HttpGrant` names its origin, adds the secret headers, and enforces the
timeouts and the response-size cap. Anywhere else, or to another origin, the request fails with
the host's reason and no connection is made. The client blocks until the whole response is read::

    from wasmop.http import Request

    response = Request.get("http://127.0.0.1:8080/records/www").send()
    if response.status == 200:
        record = response.json()

A failed request raises :class:`HttpError`, a transient :class:`~wasmop.Error`: raised out of a
handler, the host retries with backoff. Natively (pytest) there is no ``wasi:http``: ``send``
raises an :class:`HttpError` saying so; test the external client behind a function of your own,
or through the host.

A recorded call (``wasmop run --record``) keeps each request and the response the plugin read,
without the values of headers and query parameters named like credentials; mark responses that
carry credentials themselves with :meth:`Request.sensitive_response`.
"""

from __future__ import annotations

import json as _json
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import Error

#: The request header that marks a response as sensitive; the host takes it off before the
#: request leaves.
SENSITIVE_RESPONSE = "wasmop-sensitive-response"


class HttpError(Error):
    """A failed request: refused by the host, a connection or protocol failure, a timeout, or a
    body that does not decode. A transient :class:`~wasmop.Error`, so the host retries."""

    def __init__(self, message: str):
        super().__init__("transient", message)


@dataclass
class Response:
    """A response, read whole."""

    #: The status code.
    status: int
    #: Response headers, as ``(name, value)`` pairs.
    headers: list[tuple[str, str]] = field(default_factory=list)
    #: The body.
    body: bytes = b""

    def json(self) -> Any:
        """The body as JSON; raises :class:`HttpError` when it is not JSON."""
        try:
            return _json.loads(self.body)
        except ValueError as e:
            raise HttpError(f"the response body is not the JSON expected: {e}") from None

    def text(self) -> str:
        """The body as text (invalid UTF-8 replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def is_success(self) -> bool:
        """Whether the status is 2xx."""
        return 200 <= self.status < 300


@dataclass
class Request:
    """An HTTP request: build it with :meth:`get`, :meth:`post`, :meth:`put`, :meth:`delete`
    (or the constructor), add headers and a body, then :meth:`send` it."""

    #: ``GET``, ``POST``, ...
    method: str
    #: The absolute URL.
    url: str
    #: Request headers, as ``(name, value)`` pairs.
    headers: list[tuple[str, str]] = field(default_factory=list)
    #: The body.
    body: bytes | None = None

    @classmethod
    def get(cls, url: str) -> Request:
        """``GET url``."""
        return cls("GET", url)

    @classmethod
    def post(cls, url: str) -> Request:
        """``POST url``."""
        return cls("POST", url)

    @classmethod
    def put(cls, url: str) -> Request:
        """``PUT url``."""
        return cls("PUT", url)

    @classmethod
    def delete(cls, url: str) -> Request:
        """``DELETE url``."""
        return cls("DELETE", url)

    def header(self, name: str, value: str) -> Request:
        """Adds a header."""
        self.headers.append((name, value))
        return self

    def json(self, body: Any) -> Request:
        """``body`` as JSON, with ``content-type: application/json``."""
        self.body = _json.dumps(body).encode()
        return self.header("content-type", "application/json")

    def sensitive_response(self) -> Request:
        """Marks the response as sensitive: a record of the call (``wasmop run --record``) keeps
        its status and headers and only the length of its body, and scrubs what the body held
        from what the plugin writes. Mark the responses that carry credentials: a token
        endpoint's, a secret store's. The mark is the request header :data:`SENSITIVE_RESPONSE`,
        which the host takes off before the request leaves."""
        if any(name.lower() == SENSITIVE_RESPONSE for name, _ in self.headers):
            return self
        return self.header(SENSITIVE_RESPONSE, "1")

    def send(self) -> Response:
        """Sends the request and reads the whole response; raises :class:`HttpError`."""
        split(self.url)
        return _transport(self)


def split(url: str) -> tuple[str, str, str]:
    """The URL's scheme, authority and path with query; raises :class:`HttpError` when it is not
    absolute."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise HttpError(f"{url!r} is not an absolute URL")
    at = min((i for i in (rest.find("/"), rest.find("?")) if i >= 0), default=len(rest))
    authority, path = rest[:at], rest[at:]
    if not authority:
        raise HttpError(f"{url!r} has no host")
    return scheme, authority, path or "/"


def _native(request: Request) -> Response:
    raise HttpError(f"{request.method} {request.url}: outgoing HTTP runs only inside the wasmop host (wasi:http); "
                    "this is a native build")


_transport: Callable[[Request], Response] = _native


def use_transport(transport: Callable[[Request], Response]) -> None:
    """Sends every request through ``transport``; the component glue installs ``wasi:http``."""
    global _transport
    _transport = transport
