"""The HTTP client: requests and responses, its errors, and how it maps onto the ``wasi:http``
imports (played by fakes around the generated bindings' types, recording what the client asks)."""

from types import SimpleNamespace

import pytest

from wasmop import Error
from wasmop.http import SENSITIVE_RESPONSE, HttpError, Request, Response, split


def test_requests_are_built_as_the_rust_sdk_builds_them():
    request = Request.post("https://api.example.com/v1/records").header("x-trace", "1").json({"name": "www"})
    assert request.method == "POST"
    assert request.headers == [("x-trace", "1"), ("content-type", "application/json")]
    assert request.body == b'{"name": "www"}'
    assert [Request.get("u").method, Request.put("u").method, Request.delete("u").method] == ["GET", "PUT", "DELETE"]


def test_a_request_marked_sensitive_carries_the_mark_once():
    request = Request.post("https://auth.example.com/token").sensitive_response().sensitive_response()
    assert request.headers == [(SENSITIVE_RESPONSE, "1")]
    assert SENSITIVE_RESPONSE == "wasmop-sensitive-response", "the host's name for it"


def test_urls_split_into_scheme_authority_and_path():
    assert split("http://127.0.0.1:8080/records?x=1") == ("http", "127.0.0.1:8080", "/records?x=1")
    assert split("https://api.example.com") == ("https", "api.example.com", "/")
    assert split("https://api.example.com?q=1") == ("https", "api.example.com", "?q=1")
    with pytest.raises(HttpError, match="not an absolute URL"):
        split("api.example.com/x")
    with pytest.raises(HttpError, match="has no host"):
        split("http:///x")


def test_responses_decode_their_body_and_one_that_is_not_json_is_an_http_error():
    assert Response(200, [], b'{"id": "rec-1"}').json() == {"id": "rec-1"}
    assert Response(204).is_success() and not Response(404).is_success()
    assert Response(200, [], b"caf\xc3\xa9 \xff").text() == "café \ufffd"
    with pytest.raises(HttpError, match="not the JSON expected"):
        Response(200, [], b"<html>").json()


def test_an_http_error_is_a_transient_error_the_host_retries():
    error = HttpError("GET u: connection refused")
    assert isinstance(error, Error) and error.kind == "transient"
    assert error == Error.transient("GET u: connection refused")


def test_natively_a_request_says_it_needs_the_host():
    with pytest.raises(HttpError, match="only inside the wasmop host"):
        Request.get("http://127.0.0.1:1/").send()


def test_methods_schemes_and_error_codes_map_onto_wasi_http(wasi_http):
    t = wasi_http.t
    assert wasi_http.method("get") == t.Method_Get()
    assert wasi_http.method("PROPFIND") == t.Method_Other("PROPFIND")
    assert wasi_http.scheme("https") == t.Scheme_Https() and wasi_http.scheme("ftp") == t.Scheme_Other("ftp")
    assert wasi_http.describe(t.ErrorCode_HttpRequestDenied()) == "denied by the host"
    assert wasi_http.describe(t.ErrorCode_InternalError("origin not granted")) == "origin not granted"
    assert wasi_http.describe(t.ErrorCode_HttpResponseBodySize(1024)) == \
        "the response body is larger than the granted 1024 bytes"
    assert wasi_http.describe(t.ErrorCode_DnsTimeout()) == "DnsTimeout"


class _Resource:
    """A fake resource handle: records when it is dropped (``with`` exits)."""

    def __init__(self, name, dropped, **methods):
        self._name, self._dropped = name, dropped
        self.__dict__.update(methods)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self._dropped.append(self._name)


def _fake(wasi_http, monkeypatch, answer):
    """Fakes of the imports around the real types; ``answer``: (status, headers, body) or an error code."""
    t, Err = wasi_http.t, wasi_http.Err
    seen, dropped = {"body": b"", "finished": False}, []

    class OutgoingRequest:
        def __init__(self, headers):
            seen["headers"] = headers

        def set_method(self, m):
            seen["method"] = m

        def set_scheme(self, s):
            seen["scheme"] = s

        def set_authority(self, a):
            seen["authority"] = a

        def set_path_with_query(self, p):
            seen["path"] = p

        def body(self):
            def write_chunk(chunk):
                seen["body"] += chunk
            return _Resource("outgoing-body", dropped,
                             write=lambda: _Resource("output-stream", dropped, blocking_write_and_flush=write_chunk))

    def finish(body, trailers):
        assert not seen["body"] or "output-stream" in dropped, "the stream is dropped before the body is finished"
        seen["finished"] = True

    def handle(request, options):
        if not isinstance(answer, tuple):
            raise Err(answer)
        status, headers, body = answer
        chunks = [body]

        def read(n):
            if not chunks:
                raise Err(wasi_http.streams.StreamError_Closed())
            return chunks.pop()
        stream = _Resource("input-stream", dropped, blocking_read=read)
        incoming = _Resource("incoming-body", dropped, stream=lambda: stream)
        fields = _Resource("headers", dropped, entries=lambda: [(n, v.encode()) for n, v in headers])
        response = _Resource("response", dropped, status=lambda: status, headers=lambda: fields,
                             consume=lambda: incoming)
        pollable = _Resource("pollable", dropped, block=lambda: None)
        return _Resource("future", dropped, subscribe=lambda: pollable,
                         get=lambda: wasi_http_ok(wasi_http_ok(response)))

    from componentize_py_types import Ok as wasi_http_ok
    fake_t = SimpleNamespace(**{name: getattr(t, name) for name in dir(t) if not name.startswith("_")})
    fake_t.Fields = SimpleNamespace(from_list=lambda entries: [(n, v.decode()) for n, v in entries])
    fake_t.OutgoingRequest = OutgoingRequest
    fake_t.OutgoingBody = SimpleNamespace(finish=finish)
    monkeypatch.setattr(wasi_http, "t", fake_t)
    monkeypatch.setattr(wasi_http, "outgoing_handler", SimpleNamespace(handle=handle))
    return seen, dropped


def test_a_request_goes_out_through_wasi_http_and_its_whole_response_comes_back(wasi_http, monkeypatch):
    seen, dropped = _fake(wasi_http, monkeypatch, (201, [("content-type", "application/json")], b'{"id": "rec-1"}'))
    request = Request.put("http://127.0.0.1:18053/zones/a/records/rec-1?x=1").header("X-Trace", "7").json({"v": 1})
    response = wasi_http.send(request)
    assert seen == {
        "method": wasi_http.t.Method_Put(), "scheme": wasi_http.t.Scheme_Http(), "authority": "127.0.0.1:18053",
        "path": "/zones/a/records/rec-1?x=1", "headers": [("x-trace", "7"), ("content-type", "application/json")],
        "body": b'{"v": 1}', "finished": True,
    }
    assert (response.status, response.headers, response.json()) == (201, [("content-type", "application/json")],
                                                                    {"id": "rec-1"})
    assert dropped[-4:] == ["input-stream", "incoming-body", "response", "future"], "each before its parent"


def test_a_request_the_host_refuses_fails_with_its_reason_worth_a_retry(wasi_http, monkeypatch):
    _fake(wasi_http, monkeypatch, wasi_http.t.ErrorCode_InternalError("http://evil.example is not granted"))
    with pytest.raises(HttpError) as refused:
        wasi_http.send(Request.get("http://evil.example/"))
    assert refused.value == Error.transient("GET http://evil.example/: http://evil.example is not granted")
