"""What the host grants a plugin beyond its caches: outgoing HTTP (:class:`HttpGrant`,
:class:`Origin`), inbound events (:class:`Inbound`), and Secret keys it reads for them
(:class:`SecretKey`)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from urllib.parse import urlsplit


@dataclass
class SecretKey:
    """A key of a Secret the host reads for the plugin; the plugin never sees the value.

    Naming a Secret here grants nothing: the host reads it only when the plugin's own
    ServiceAccount may get it, or when the operator allowed it for this plugin
    (``allowedSecrets`` in its ReconcilerPlugin's ``spec.overrides``, or in the configuration
    file for a plugin loaded from a file); otherwise the plugin is refused at load, naming the
    Secret. A secret header goes to an ``http`` origin only when the operator lists it in
    ``allowPlainHttpSecrets``."""

    name: str
    key: str
    namespace: str | None = None

    def in_namespace(self, namespace: str) -> SecretKey:
        """The Secret lives in ``namespace`` (default: the namespace the host runs in)."""
        self.namespace = namespace
        return self


@dataclass
class Origin:
    """An origin (scheme, host, port) the plugin may call, with headers the host adds from
    Secrets.

    >>> Origin.parse("http://127.0.0.1:18053/zones").port
    18053
    """

    scheme: str
    host: str
    port: int | None = None
    #: ``(header, secret, prefix)``: the host sets ``header`` to ``prefix`` + the Secret's value.
    secret_headers: list[tuple[str, SecretKey, str | None]] = field(default_factory=list)

    @classmethod
    def parse(cls, url: str) -> Origin:
        """The origin of ``url``; its path is ignored."""
        parts = urlsplit(url)
        return cls(parts.scheme, parts.hostname or "", parts.port)

    def secret_header(self, header: str, secret: SecretKey, prefix: str | None = None) -> Origin:
        """Adds ``header: <prefix><secret value>`` to every request to this origin."""
        self.secret_headers.append((header, secret, prefix))
        return self


@dataclass
class HttpGrant:
    """Outgoing HTTP the host allows, in ``fetch``, ``fetch_all``, ``apply_external`` and
    ``delete_external`` only. Timeouts are in seconds (or timedeltas); unset means the host's
    defaults."""

    origins: list[Origin] = field(default_factory=list)
    connect_timeout_seconds: float | datetime.timedelta | None = None
    timeout_seconds: float | datetime.timedelta | None = None
    max_response_bytes_: int | None = None
    max_concurrent_: int | None = None

    def origin(self, origin: Origin) -> HttpGrant:
        """Allows requests to ``origin``."""
        self.origins.append(origin)
        return self

    def connect_timeout(self, timeout: float | datetime.timedelta) -> HttpGrant:
        """Fails a request whose connection takes longer."""
        self.connect_timeout_seconds = timeout
        return self

    def timeout(self, timeout: float | datetime.timedelta) -> HttpGrant:
        """Fails a request that takes longer as a whole."""
        self.timeout_seconds = timeout
        return self

    def max_response_bytes(self, limit: int) -> HttpGrant:
        """Fails a response whose body is larger."""
        self.max_response_bytes_ = limit
        return self

    def max_concurrent(self, requests: int) -> HttpGrant:
        """At most this many requests of the plugin at once."""
        self.max_concurrent_ = requests
        return self


@dataclass
class Inbound:
    """Inbound events: ``POST /plugins/<name>/events`` on the host's events listener with this
    bearer token, mapped to primaries by the plugin's ``map_inbound``."""

    token: SecretKey
    caching_: bool = False

    def caching(self) -> Inbound:
        """Keep the last payload per primary and give it to ``reconcile`` (``ctx.inbound``)."""
        self.caching_ = True
        return self
