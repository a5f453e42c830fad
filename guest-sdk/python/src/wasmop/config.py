"""What a plugin says about itself: :class:`Config`, with :class:`Filters`, :class:`Retry` and
:class:`RateLimit`. The host reads it once, when it loads the plugin."""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass, field

from .dependents import Dependent
from .external import ExternalDependent, Polling
from .grant import HttpGrant, Inbound
from .kinds import Kind
from .predicate import Predicate
from .watch import Watch
from .webhook import Webhook

#: A duration: seconds, or a timedelta.
Seconds = float | datetime.timedelta


@dataclass(frozen=True)
class Filters:
    """Which changes of a primary lead to a reconcile (controller-runtime's predicates)."""

    on_create: bool = True
    on_update: bool = True
    on_delete: bool = True
    #: Also reconcile when annotations change, even without a new generation.
    on_annotation_change: bool = False
    #: Also reconcile when labels change, even without a new generation.
    on_label_change: bool = False


@dataclass(frozen=True)
class Retry:
    """Retry policy for transient failures (JOSDK's ``GenericRetry``): the delay starts at
    ``initial_interval`` seconds and grows by ``multiplier`` up to ``max_interval``, each spread
    at random by ``jitter`` (0.1 = ±10%). The defaults are the host's."""

    max_attempts: int = 5
    initial_interval: Seconds = 2
    multiplier: float = 1.5
    max_interval: Seconds = 300
    jitter: float = 0.0


@dataclass(frozen=True)
class RateLimit:
    """At most ``max_reconciles`` reconciles of one object within any ``period`` (seconds);
    excess reconciles are postponed, never dropped."""

    max_reconciles: int
    period: Seconds


class Sharding(enum.Enum):
    """How a host run with ``--shards`` splits the plugin's primaries across its replicas."""

    #: By the primary's UID: the objects spread evenly (the host's default).
    UID = "uid"
    #: By the primary's namespace: a namespace's primaries stay on one replica.
    NAMESPACE = "namespace"
    #: Not sharded: the elected leader alone runs the plugin, on every primary.
    NONE = "none"


@dataclass
class Config:
    """The plugin's name, its primary kind, and how the host should schedule it.

    The host keeps the primary's ``Ready``, ``Reconciling`` and ``Degraded`` conditions for a
    custom resource (a kind with a group) unless :meth:`own_conditions` says otherwise.

    >>> config = Config("greeting", Kind.namespaced("example.wasmop.dev", "v1", "Greeting"))
    >>> config.project(["spec"]).projection
    ['spec']
    """

    name: str
    primary: Kind
    label_selector_: str | None = None
    field_selector_: str | None = None
    filters_: Filters = field(default_factory=Filters)
    generation_aware_: bool = True
    retry_: Retry | None = None
    max_reconcile_interval_: Seconds | None = None
    rate_limit_: RateLimit | None = None
    max_concurrent_reconciles_: int | None = None
    watches: list[Watch] = field(default_factory=list)
    resync_period_: Seconds | None = None
    #: A named finalizer; None: ``wasmop.dev/<name>`` (used only when the plugin needs one).
    finalizer_name: str | None = None
    finalizer_disabled: bool = False
    dependents: list[Dependent] = field(default_factory=list)
    conditions: bool | None = None
    projection: list[str] | None = None
    predicate_: Predicate | None = None
    http_: HttpGrant | None = None
    polling_: Polling | None = None
    inbound_: Inbound | None = None
    external_dependents: list[ExternalDependent] = field(default_factory=list)
    sharding_: Sharding | None = None
    webhooks: list[Webhook] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.conditions is None:
            self.conditions = bool(self.primary.group)

    def project(self, paths: list[str]) -> Config:
        """The paths of the primary the plugin reads: the host caches those, ``status`` and the
        metadata only, and gives the plugin those and the metadata only. Name ``status`` (or
        parts of it) if the plugin reads its own status."""
        self.projection = list(paths)
        return self

    def own_conditions(self) -> Config:
        """The plugin keeps the primary's conditions itself; the host writes none."""
        self.conditions = False
        return self

    def label_selector(self, selector: str) -> Config:
        """Only reconcile primaries matching this label selector."""
        self.label_selector_ = selector
        return self

    def field_selector(self, selector: str) -> Config:
        """Only reconcile primaries matching this field selector."""
        self.field_selector_ = selector
        return self

    def filters(self, filters: Filters) -> Config:
        """Which changes lead to a reconcile."""
        self.filters_ = filters
        return self

    def generation_aware(self, generation_aware: bool) -> Config:
        """Skip updates that do not change ``metadata.generation`` (on by default)."""
        self.generation_aware_ = generation_aware
        return self

    def retry(self, retry: Retry) -> Config:
        """The retry policy (default: the host's)."""
        self.retry_ = retry
        return self

    def max_reconcile_interval(self, interval: Seconds) -> Config:
        """Reconcile at least this often even without events; 0 turns it off."""
        self.max_reconcile_interval_ = interval
        return self

    def rate_limit(self, rate_limit: RateLimit) -> Config:
        """A per-object rate limit."""
        self.rate_limit_ = rate_limit
        return self

    def max_concurrent_reconciles(self, max_: int) -> Config:
        """Concurrent reconciles of this plugin."""
        self.max_concurrent_reconciles_ = max_
        return self

    def watch(self, watch: Watch) -> Config:
        """Adds a secondary kind whose changes reconcile primaries."""
        self.watches.append(watch)
        return self

    def resync_period(self, period: Seconds) -> Config:
        """Reconcile every cached primary this often, at background priority."""
        self.resync_period_ = period
        return self

    def finalizer(self, name: str) -> Config:
        """Name the primary's finalizer (default ``wasmop.dev/<plugin name>``)."""
        self.finalizer_name = name
        return self

    def no_finalizer(self) -> Config:
        """Never a finalizer: ``cleanup`` never runs."""
        self.finalizer_disabled = True
        return self

    def dependent(self, dependent: Dependent) -> Config:
        """Adds a kind the reconciles create and keep in shape."""
        self.dependents.append(dependent)
        return self

    def predicate(self, predicate: Predicate) -> Config:
        """The primary's predicate: replaces its update filtering."""
        self.predicate_ = predicate
        return self

    def http(self, grant: HttpGrant) -> Config:
        """Outgoing HTTP the host grants."""
        self.http_ = grant
        return self

    def polling(self, polling: Polling) -> Config:
        """Polling of external state."""
        self.polling_ = polling
        return self

    def inbound(self, inbound: Inbound) -> Config:
        """Inbound events."""
        self.inbound_ = inbound
        return self

    def external_dependent(self, dependent: ExternalDependent) -> Config:
        """Adds objects outside the cluster the reconciles keep in shape."""
        self.external_dependents.append(dependent)
        return self

    def sharding(self, sharding: Sharding) -> Config:
        """How a host run with ``--shards`` splits the primaries across its replicas (default
        :attr:`Sharding.UID`); :attr:`Sharding.NONE` runs the plugin on the elected leader alone.
        A deploy-time override beats it; without ``--shards`` it changes nothing."""
        self.sharding_ = sharding
        return self

    def webhook(self, webhook: Webhook) -> Config:
        """Serves ``webhook`` through the host: the API server calls the host, and the host calls
        the plugin's ``validate`` for a :meth:`Webhook.validating`, ``default`` for a
        :meth:`Webhook.mutating`, ``convert`` for a :meth:`Webhook.conversion`. At most one of
        each type."""
        self.webhooks.append(webhook)
        return self
