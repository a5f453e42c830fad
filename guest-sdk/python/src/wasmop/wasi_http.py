"""The ``wasi:http`` transport of :mod:`wasmop.http`: the only module that imports the bindings
componentize-py generates for ``wasi:http``, present when the plugin is built against the
``operator-http`` world (a plugin that declares an ``http`` grant). The component glue installs
:func:`send`; in any other build importing this module fails.

It calls ``outgoing-handler.handle``, writes the body through the request's output stream,
blocks on the future's pollable, and reads the response body from its input stream to the end.
"""

from __future__ import annotations

from typing import Any, Callable

from componentize_py_types import Err
from wit_world.imports import outgoing_handler, streams
from wit_world.imports import wasi_http_types as t

from .http import HttpError, Request, Response, split

_METHODS = {"GET": t.Method_Get, "HEAD": t.Method_Head, "POST": t.Method_Post, "PUT": t.Method_Put,
            "DELETE": t.Method_Delete, "PATCH": t.Method_Patch, "OPTIONS": t.Method_Options}

#: How much of a body one read or write moves.
_CHUNK = 64 * 1024


def method(name: str) -> t.Method:
    """The ``wasi:http`` method named ``name``."""
    known = _METHODS.get(name.upper())
    return known() if known is not None else t.Method_Other(name)


def scheme(name: str) -> t.Scheme:
    """The ``wasi:http`` scheme named ``name``."""
    return {"http": t.Scheme_Http, "https": t.Scheme_Https}.get(name, lambda: t.Scheme_Other(name))()


def describe(error: t.ErrorCode) -> str:
    """The host's reason for a failed request, in words."""
    if isinstance(error, t.ErrorCode_InternalError) and error.value:
        return error.value
    if isinstance(error, t.ErrorCode_HttpResponseBodySize):
        return f"the response body is larger than the granted {error.value or 0} bytes"
    words = {
        t.ErrorCode_HttpRequestDenied: "denied by the host",
        t.ErrorCode_ConnectionRefused: "connection refused",
        t.ErrorCode_ConnectionTimeout: "connect timed out (the http grant's connect timeout)",
        t.ErrorCode_ConnectionReadTimeout: "timed out reading the response",
        t.ErrorCode_HttpResponseTimeout: "timed out waiting for the response (the http grant's timeout)",
    }
    return words.get(type(error), type(error).__name__.removeprefix("ErrorCode_"))


def send(request: Request) -> Response:
    """Sends ``request`` through ``wasi:http`` and reads the whole response."""
    what = f"{request.method} {request.url}"

    def fail(reason: str) -> HttpError:
        return HttpError(f"{what}: {reason}")

    scheme_name, authority, path = split(request.url)
    try:
        headers = t.Fields.from_list([(name.lower(), value.encode()) for name, value in request.headers])
    except Err as e:
        raise fail(f"invalid header: {type(e.value).__name__.removeprefix('HeaderError_')}") from None
    outgoing = t.OutgoingRequest(headers)
    for setter, value, what_ in ((outgoing.set_method, method(request.method), "method"),
                                 (outgoing.set_scheme, scheme(scheme_name), "scheme"),
                                 (outgoing.set_authority, authority, "host"),
                                 (outgoing.set_path_with_query, path, "path")):
        try:
            setter(value)
        except Err:
            raise fail(f"invalid {what_}") from None
    body = outgoing.body()
    try:
        future = outgoing_handler.handle(outgoing, None)
    except Err as e:
        raise fail(describe(e.value)) from None
    if request.body:
        with body.write() as stream:
            for at in range(0, len(request.body), 4096):
                try:
                    stream.blocking_write_and_flush(request.body[at:at + 4096])
                except Err as e:
                    raise fail(f"writing the body: {type(e.value).__name__}") from None
    try:
        t.OutgoingBody.finish(body, None)
    except Err as e:
        raise fail(describe(e.value)) from None
    with future:
        with future.subscribe() as ready:
            ready.block()
        return _response(future.get(), fail)


def _response(answer: Any, fail: Callable[[str], HttpError]) -> Response:
    """The response a future gave, read whole; each resource dropped before the one it came from."""
    if answer is None or isinstance(answer, Err):
        raise fail("the response was lost")
    if isinstance(answer.value, Err):
        raise fail(describe(answer.value.value))
    chunks = []
    with answer.value.value as response:
        status = response.status()
        with response.headers() as fields:
            head = [(name, value.decode("utf-8", errors="replace")) for name, value in fields.entries()]
        with response.consume() as incoming, incoming.stream() as stream:
            while True:
                try:
                    chunks.append(stream.blocking_read(_CHUNK))
                except Err as e:
                    if isinstance(e.value, streams.StreamError_Closed):
                        break
                    raise fail(f"reading the body: {e.value.value.to_debug_string()}") from None
    return Response(status, head, b"".join(chunks))
