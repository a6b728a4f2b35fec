"""Who may read the serving port, decided by the API server, as kube-scheduler decides
it (k8s.io/apiserver's delegating authenticator and authorizer).

A request to a path that is not always allowed (``/healthz``, ``/readyz``, ``/livez``)
needs ``Authorization: Bearer <token>``. The token is authenticated by a TokenReview
(``authentication.k8s.io/v1``); the identity it names is authorized by a
SubjectAccessReview (``authorization.k8s.io/v1``) of the non-resource URL (the path)
with verb ``get``, as ``nonResourceURLs: [/metrics], verbs: [get]`` in a ClusterRole
grants. Answers: 401 without a token or with one the API server does not
authenticate, 403 when the identity may not get the path, 503 while a review cannot
be made (the API server unreachable; not cached).

Both answers are cached for 10 s, positive and negative alike (kube's defaults for
the delegated authenticator and authorizer), in bounded LRU caches, so that a scrape
every few seconds costs the API server one pair of reviews per 10 s. Tokens are
cached by their SHA-256. Concurrent requests with one token share one review; at most
``max_in_flight`` reviews run at once (in threads of their own, never on the event
loop, never in the scheduler's API workers), and a request past that is answered 503
at once rather than queued. Reviews go in plain JSON over the blocking client
(``scheduler.k8s.client.blocking``) with the scheduler's credentials.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from scheduler.k8s.client.blocking import BlockingClient, Timeout
from scheduler.k8s.client.reads import WORKER_PREFIX

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger(__name__)
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# kube-scheduler's --authorization-always-allow-paths.
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
# kube's DelegatingAuthenticationOptions.CacheTTL and DelegatingAuthorizationOptions'
# AllowCacheTTL and DenyCacheTTL.
CACHE_TTL_S = 10.0
CACHE_ENTRIES = 1024
MAX_IN_FLIGHT = 8
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
SUBJECT_ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

# Blocking: POST a review (the collection's path, the object) and return its status.
Review = Callable[[str, dict[str, Any]], dict[str, Any]]


class TtlCache(Generic[K, V]):
    """At most ``max_entries`` values, each for ``ttl_s`` after it was put; the least
    recently used goes first when full."""

    def __init__(self, ttl_s: float, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self.entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> tuple[bool, V | None]:
        """(found, value); an expired entry is dropped and not found."""
        entry = self.entries.get(key)
        if entry is None:
            return False, None
        expires, value = entry
        if self.clock() >= expires:
            del self.entries[key]
            return False, None
        self.entries.move_to_end(key)
        return True, value

    def put(self, key: K, value: V) -> None:
        self.entries[key] = (self.clock() + self.ttl_s, value)
        self.entries.move_to_end(key)
        while len(self.entries) > self.max_entries:
            self.entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class Identity:
    """Who a TokenReview says a token belongs to (``status.user``)."""

    user: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def from_review(cls, user: dict[str, Any]) -> Identity:
        extra = user.get("extra") or {}
        return cls(
            str(user.get("username") or ""),
            str(user.get("uid") or ""),
            tuple(str(g) for g in user.get("groups") or ()),
            tuple(sorted((str(k), tuple(str(x) for x in v or ())) for k, v in extra.items())),
        )


@dataclass(frozen=True)
class Verdict:
    """200 to serve the request; otherwise the status and why."""

    status: int
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


ALLOWED = Verdict(200)


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header (the scheme is
    case-insensitive, RFC 7235); None for anything else."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


def token_review(token: str) -> dict[str, Any]:
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": token}}


def access_review(identity: Identity, path: str, verb: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "user": identity.user,
        "groups": list(identity.groups),
        "nonResourceAttributes": {"path": path, "verb": verb},
    }
    if identity.uid:
        spec["uid"] = identity.uid
    if identity.extra:
        spec["extra"] = {key: list(values) for key, values in identity.extra}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}


class ReviewUnavailableError(Exception):
    """A review could not be made (the API server unreachable, or too many in flight)."""


class DelegatedAuth:
    """Decides each request to the serving port (see the module's docstring)."""

    def __init__(
        self,
        review: Review,
        always_allow: Collection[str] = ALWAYS_ALLOW_PATHS,
        *,
        ttl_s: float = CACHE_TTL_S,
        max_entries: int = CACHE_ENTRIES,
        max_in_flight: int = MAX_IN_FLIGHT,
        clock: Callable[[], float] = time.monotonic,
        on_close: Callable[[], None] = lambda: None,
    ) -> None:
        """``on_close``: called by ``close`` (the review's connections)."""
        self.review = review
        self.on_close = on_close
        self.always_allow = frozenset(always_allow)
        self.identities: TtlCache[str, Identity | None] = TtlCache(ttl_s, max_entries, clock)
        self.decisions: TtlCache[tuple[Identity, str, str], bool] = TtlCache(ttl_s, max_entries, clock)
        self.max_in_flight = max_in_flight
        self.in_flight: dict[Hashable, asyncio.Future[Any]] = {}
        self.executor = ThreadPoolExecutor(max_in_flight, thread_name_prefix=f"{WORKER_PREFIX}-auth")

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        self.on_close()

    async def check(self, path: str, authorization: str | None, verb: str = "get") -> Verdict:
        if path in self.always_allow:
            return ALLOWED
        token = bearer_token(authorization)
        if token is None:
            return Verdict(401, "a bearer token is required")
        try:
            identity = await self.authenticate(token)
            if identity is None:
                return Verdict(401, "the token was not authenticated")
            if not await self.authorize(identity, path, verb):
                return Verdict(403, f'user "{identity.user}" may not {verb} path "{path}"')
        except ReviewUnavailableError as error:
            return Verdict(503, str(error))
        return ALLOWED

    async def authenticate(self, token: str) -> Identity | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        found, identity = self.identities.get(key)
        if found:
            return identity

        def ask() -> Identity | None:
            status = self.review(TOKEN_REVIEWS, token_review(token))
            if not status.get("authenticated"):
                return None
            return Identity.from_review(status.get("user") or {})

        identity = await self._once(("authn", key), ask)
        self.identities.put(key, identity)
        return identity

    async def authorize(self, identity: Identity, path: str, verb: str) -> bool:
        key = (identity, path, verb)
        found, allowed = self.decisions.get(key)
        if found:
            return bool(allowed)

        def ask() -> bool:
            status = self.review(SUBJECT_ACCESS_REVIEWS, access_review(identity, path, verb))
            return bool(status.get("allowed"))

        allowed = await self._once(("authz", key), ask)
        self.decisions.put(key, allowed)
        return allowed

    async def _once(self, key: Hashable, ask: Callable[[], V]) -> V:
        """``ask()`` in a review thread, shared by concurrent callers with one key."""
        shared = self.in_flight.get(key)
        if shared is None:
            if len(self.in_flight) >= self.max_in_flight:
                raise ReviewUnavailableError(f"{len(self.in_flight)} reviews in flight; try again")
            loop = asyncio.get_running_loop()
            shared = asyncio.ensure_future(self._run(loop.run_in_executor(self.executor, ask)))
            self.in_flight[key] = shared
            shared.add_done_callback(lambda _: self.in_flight.pop(key, None))
        result: V = await asyncio.shield(shared)
        return result

    @staticmethod
    async def _run(call: Awaitable[V]) -> V:
        try:
            return await call
        except Exception as error:
            log.warning("delegated authentication or authorization failed: %s", error)
            raise ReviewUnavailableError(f"the API server could not review the request: {error}") from error


def api_review(http: BlockingClient, timeout: Timeout) -> Review:
    """``Review`` over ``http`` (blocking): the answer's ``status``. An answer that is
    not 2xx raises ``ApiException``; one without an object ``status`` raises
    ``ValueError`` naming the review and the field (the request is answered 503)."""

    def review(path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = http.json("POST", path, body, timeout=timeout)
        kind = body.get("kind", path)
        if not isinstance(answer, Mapping):
            raise ValueError(f"{kind}: the answer is not a JSON object")
        status = answer.get("status") or {}
        if not isinstance(status, Mapping):
            raise ValueError(f"{kind}: status is not an object: {status!r:.100}")
        return dict(status)

    return review


def delegated_auth(
    api_client: client.ApiClient, timeout: Timeout, always_allow: Collection[str] = ALWAYS_ALLOW_PATHS
) -> DelegatedAuth:
    """``DelegatedAuth`` asking the API server of ``api_client`` (its Configuration and
    credentials) over a ``BlockingClient`` of its own, closed with it."""
    http = BlockingClient(api_client.configuration, api_client, max_connections=MAX_IN_FLIGHT)
    return DelegatedAuth(api_review(http, timeout), always_allow, on_close=http.close)
