"""Delegated authentication and authorization, as pure logic: the verdict for each
request, the 10 s caches, one review for concurrent requests with one token, and no
cached answer while the API server cannot review. The API server is a table here;
tests/e2e/test_serving.py asks a real one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from scheduler.k8s.serving.delegated_auth import (
    SUBJECT_ACCESS_REVIEWS,
    TOKEN_REVIEWS,
    DelegatedAuth,
    Identity,
    TtlCache,
    api_review,
    bearer_token,
    delegated_auth,
    token_review,
)

READER = {
    "username": "system:serviceaccount:monitoring:prometheus",
    "uid": "u1",
    "groups": ["system:serviceaccounts"],
}
STRANGER = {"username": "jane", "groups": ["system:authenticated"]}


class FakeApiServer:
    """TokenReviews and SubjectAccessReviews from two tables; counts each review."""

    def __init__(self) -> None:
        self.tokens: dict[str, dict[str, Any]] = {"reader-token": READER, "stranger-token": STRANGER}
        self.allowed: set[tuple[str, str]] = {(READER["username"], "/metrics")}
        self.reviews: list[str] = []
        self.down = False

    def review(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.reviews.append(body["kind"])
        if self.down:
            raise ConnectionError("connection refused")
        spec = body["spec"]
        if path == TOKEN_REVIEWS:
            user = self.tokens.get(spec["token"])
            return {"authenticated": True, "user": user} if user else {"authenticated": False}
        assert path == SUBJECT_ACCESS_REVIEWS
        attributes = spec["nonResourceAttributes"]
        assert attributes["verb"] == "get"
        return {"allowed": (spec["user"], attributes["path"]) in self.allowed}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def check(auth: DelegatedAuth, path: str, authorization: str | None) -> tuple[int, str]:
    verdict = asyncio.run(auth.check(path, authorization))
    return verdict.status, verdict.reason


@pytest.mark.parametrize(
    ("path", "authorization", "status", "reviews"),
    [
        pytest.param("/healthz", None, 200, [], id="a probe needs no token"),
        pytest.param("/readyz", "Bearer nonsense", 200, [], id="nor is its token looked at"),
        pytest.param("/metrics", None, 401, [], id="no token: 401"),
        pytest.param("/metrics", "Basic dXNlcjpwYXNz", 401, [], id="not a bearer token: 401"),
        pytest.param("/metrics", "Bearer", 401, [], id="an empty bearer token: 401"),
        pytest.param("/metrics", "Bearer forged", 401, ["TokenReview"], id="a token not authenticated: 401"),
        pytest.param(
            "/metrics",
            "Bearer stranger-token",
            403,
            ["TokenReview", "SubjectAccessReview"],
            id="authenticated, not allowed: 403",
        ),
        pytest.param(
            "/metrics",
            "bearer reader-token",
            200,
            ["TokenReview", "SubjectAccessReview"],
            id="allowed (the scheme in any case)",
        ),
        pytest.param(
            "/debug/pprof",
            "Bearer reader-token",
            403,
            ["TokenReview", "SubjectAccessReview"],
            id="allowed /metrics only: another path 403",
        ),
    ],
)
def test_each_request_gets_its_verdict(
    path: str, authorization: str | None, status: int, reviews: list[str]
) -> None:
    server = FakeApiServer()
    auth = DelegatedAuth(server.review)
    assert check(auth, path, authorization)[0] == status
    assert server.reviews == reviews


def test_a_forbidden_answer_names_the_user_and_the_path() -> None:
    auth = DelegatedAuth(FakeApiServer().review)
    assert check(auth, "/metrics", "Bearer stranger-token") == (
        403,
        'user "jane" may not get path "/metrics"',
    )


def test_answers_are_cached_for_ten_seconds_allowed_and_denied_alike() -> None:
    server, clock = FakeApiServer(), Clock()
    auth = DelegatedAuth(server.review, clock=clock)
    for _ in range(3):
        assert check(auth, "/metrics", "Bearer reader-token")[0] == 200
        assert check(auth, "/metrics", "Bearer stranger-token")[0] == 403
        assert check(auth, "/metrics", "Bearer forged")[0] == 401
    assert len(server.reviews) == 2 + 2 + 1  # once each within the 10 s
    # Revoked meanwhile: still allowed until the cached answers expire (as kube's).
    server.allowed.clear()
    clock.now += 9.9
    assert check(auth, "/metrics", "Bearer reader-token")[0] == 200
    clock.now += 0.2
    assert check(auth, "/metrics", "Bearer reader-token")[0] == 403
    assert server.reviews[5:] == ["TokenReview", "SubjectAccessReview"]


def test_while_the_api_server_cannot_review_503_and_nothing_is_cached() -> None:
    server = FakeApiServer()
    server.down = True
    auth = DelegatedAuth(server.review)
    status, reason = check(auth, "/metrics", "Bearer reader-token")
    assert status == 503
    assert "connection refused" in reason
    server.down = False
    assert check(auth, "/metrics", "Bearer reader-token")[0] == 200


def test_concurrent_requests_with_one_token_share_one_review() -> None:
    server = FakeApiServer()
    auth = DelegatedAuth(server.review)

    async def many() -> list[int]:
        verdicts = await asyncio.gather(*(auth.check("/metrics", "Bearer reader-token") for _ in range(20)))
        return [v.status for v in verdicts]

    assert asyncio.run(many()) == [200] * 20
    assert server.reviews == ["TokenReview", "SubjectAccessReview"]


def test_past_max_in_flight_reviews_a_request_is_answered_503_at_once() -> None:
    started = asyncio.Event()

    async def scenario() -> list[int]:
        loop = asyncio.get_running_loop()
        release = asyncio.Event()

        def slow_review(path: str, body: dict[str, Any]) -> dict[str, Any]:
            loop.call_soon_threadsafe(started.set)
            asyncio.run_coroutine_threadsafe(release.wait(), loop).result(5)
            return {"authenticated": False}

        auth = DelegatedAuth(slow_review, max_in_flight=2)
        first = [asyncio.create_task(auth.check("/metrics", f"Bearer t{i}")) for i in range(2)]
        await started.wait()
        late = await auth.check("/metrics", "Bearer t3")
        release.set()
        return [late.status, *[(await task).status for task in first]]

    assert asyncio.run(scenario()) == [503, 401, 401]


@pytest.mark.parametrize(
    ("header", "token"),
    [
        pytest.param(None, None, id="absent"),
        pytest.param("Bearer abc.DEF", "abc.DEF", id="bearer"),
        pytest.param("BEARER  abc ", "abc", id="any case, spaces around"),
        pytest.param("Bearer a b", None, id="two words"),
        pytest.param("Token abc", None, id="another scheme"),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_the_cache_expires_entries_and_drops_the_least_recently_used() -> None:
    clock = Clock()
    cache: TtlCache[str, int] = TtlCache(10.0, 2, clock)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == (True, 1)  # a is now the most recently used
    cache.put("c", 3)
    assert cache.get("b") == (False, None)
    assert cache.get("a") == (True, 1)
    clock.now += 10
    assert cache.get("a") == (False, None)
    assert len(cache) == 1  # c, until it is asked for


def test_the_identity_of_a_review_is_hashable_and_ordered() -> None:
    user = {"username": "u", "extra": {"b": ["2"], "a": ["1"]}, "groups": ["g"]}
    assert Identity.from_review(user) == Identity("u", "", ("g",), (("a", ("1",)), ("b", ("2",))))
    assert hash(Identity.from_review(user)) == hash(Identity.from_review(dict(user)))


class FakeBlockingClient:
    """``BlockingClient.json`` answering ``answer`` (raised when an exception)."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.asked: list[tuple[str, str, Any, Any]] = []

    def json(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        self.asked.append((method, path, body, options.get("timeout")))
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        pytest.param({"status": {"authenticated": True}}, {"authenticated": True}, id="the-status"),
        pytest.param({"kind": "TokenReview"}, {}, id="no-status-is-an-empty-one"),
        pytest.param([], ValueError("TokenReview: the answer is not a JSON object"), id="not-an-object"),
        pytest.param(
            {"status": "yes"}, ValueError("TokenReview: status is not an object: 'yes'"), id="bad-status"
        ),
        pytest.param(ApiException(status=403, reason="Forbidden"), ApiException, id="refused-raises"),
    ],
)
def test_a_review_posts_the_object_and_reads_its_status(answer: Any, expected: Any) -> None:
    http = FakeBlockingClient(answer)
    review = api_review(http, (5.0, 30.0))  # type: ignore[arg-type]
    body = token_review("t")
    if isinstance(expected, dict):
        assert review(TOKEN_REVIEWS, body) == expected
    else:
        kind = expected if isinstance(expected, type) else type(expected)
        with pytest.raises(kind) as raised:
            review(TOKEN_REVIEWS, body)
        if isinstance(expected, ValueError):
            assert str(raised.value) == str(expected)
    assert http.asked == [("POST", TOKEN_REVIEWS, body, (5.0, 30.0))]


def test_delegated_auth_closes_its_connections_with_it() -> None:
    auth = delegated_auth(client.ApiClient(client.Configuration(host="http://127.0.0.1:9")), (1.0, 1.0))
    auth.close()
    with pytest.raises(ConnectionError, match="closed"):
        auth.review(TOKEN_REVIEWS, token_review("t"))
