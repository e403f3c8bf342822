"""Failures as GatewayError with the envelope's fields, and retries: a retryable failure is sent again (a create
with the same Idempotency-Key, so a lost answer makes one sandbox), a failure that is not retryable is not, and an
input write whose answer was lost is never sent twice."""
from __future__ import annotations

import asyncio
import json
import time
from typing import Any, Callable, Dict, List

import httpx
import pytest

from sandbox_gateway import AsyncClient, Client, GatewayError


def test_the_envelope_as_an_exception(gateway: Dict[str, Any], gw: Client) -> None:
    with Client(gateway["base_url"], "metal_sk_" + "x" * 43, gateway["project_id"], attempts=1) as stranger:
        with pytest.raises(GatewayError) as unknown:
            stranger.sandboxes.list()
    assert (unknown.value.code, unknown.value.status, unknown.value.retryable) == ("unauthenticated", 401, False)
    assert unknown.value.request_id and unknown.value.request_id.startswith("req_")
    assert "unauthenticated" in str(unknown.value)

    with pytest.raises(GatewayError) as invalid:
        gw.sandboxes.create(resources={"vcpu": 1, "memory_mb": 1})
    assert (invalid.value.code, invalid.value.status) == ("validation_error", 422)
    assert any("memory_mb" in issue["path"] for issue in invalid.value.details["issues"])

    # An environment the gateway does not have: the message names the known ones (gw.environments.list()).
    known = [e["name"] for e in gw.environments.list()]
    with pytest.raises(GatewayError) as unknown_environment:
        gw.sandboxes.create("ubuntu-22.04")
    assert (unknown_environment.value.code, unknown_environment.value.status) == ("validation_error", 422)
    assert unknown_environment.value.message == "source.environment must be one of: " + ", ".join(known)
    assert unknown_environment.value.details["issues"][0]["path"] == "source.environment"

    with pytest.raises(GatewayError) as missing:
        gw.sandboxes.get("sbx_doesnotexist")
    assert (missing.value.code, missing.value.status, missing.value.retryable) == ("not_found", 404, False)


class Faults(httpx.HTTPTransport):
    """The real transport, with one fault: ``lose`` drops the answer of the first request it matches after the
    gateway handled it; ``fail`` answers the first N it matches with a retryable 503 without sending them."""

    def __init__(self, lose: Callable[[httpx.Request], bool] = lambda r: False, fail: Callable[[httpx.Request], bool] = lambda r: False, failures: int = 1) -> None:
        super().__init__()
        self.lose, self.fail, self.failures = lose, fail, failures
        self.seen: List[httpx.Request] = []
        self.lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.fail(request):
            self.seen.append(request)
            if self.failures > 0:
                self.failures -= 1
                body = {"code": "database_busy", "message": "busy", "request_id": "req_test", "retryable": True}
                return httpx.Response(503, json=body, request=request)
        response = super().handle_request(request)
        if self.lose(request):
            self.seen.append(request)
            if self.lost == 0:
                self.lost += 1
                response.read()
                response.close()
                raise httpx.ReadError("the answer was lost on the way back", request=request)
        return response


def creates(request: httpx.Request) -> bool:
    return request.method == "POST" and request.url.path == "/v1/sandboxes"


def test_a_create_whose_answer_is_lost_is_sent_again_with_its_key_and_makes_one_sandbox(gateway: Dict[str, Any], gw: Client) -> None:
    tag = f"lost-{time.time_ns()}"
    faults = Faults(lose=creates)
    with Client(**gateway, transport=faults) as client:
        sandbox = client.sandboxes.create("metal/base", provider="e2b", metadata={"suite": tag})
        keys = [r.headers["idempotency-key"] for r in faults.seen]
        assert len(keys) == 2 and keys[0] == keys[1]
        assert [s.id for s in gw.sandboxes.list(metadata={"suite": tag}).items] == [sandbox.id]

        # Standard input is not safe to send twice: a write whose answer was lost is reported, not resent.
        process = sandbox.start(["cat"], stdin=True)
        faults.lose = lambda r: r.url.path.endswith("/stdin")
        faults.lost = 0
        faults.seen.clear()
        with pytest.raises(GatewayError) as lost:
            process.write("once\n")
        assert (lost.value.code, lost.value.retryable, len(faults.seen)) == ("network_error", False, 1)
        process.write("", eof=True)
        assert process.wait().stdout == "once\n"
        sandbox.destroy()


def test_retryable_failures_are_retried_and_others_are_not(gateway: Dict[str, Any]) -> None:
    reads = lambda r: r.method == "GET" and r.url.path == "/v1/sandboxes"  # noqa: E731
    faults = Faults(fail=reads, failures=2)
    with Client(**gateway, transport=faults) as client:
        assert client.sandboxes.list().items is not None
        assert len(faults.seen) == 3  # two 503s, then the answer

    always = Faults(fail=reads, failures=100)
    with Client(**gateway, transport=always, attempts=3) as client:
        with pytest.raises(GatewayError) as busy:
            client.sandboxes.list()
        assert (busy.value.code, busy.value.status, busy.value.retryable, len(always.seen)) == ("database_busy", 503, True, 3)

    gets = Faults(lose=lambda r: r.url.path == "/v1/sandboxes/sbx_doesnotexist")
    with Client(**gateway, transport=gets) as client, pytest.raises(GatewayError) as missing:
        client.sandboxes.get("sbx_doesnotexist")  # lost once (retried), then 404: not retried
    assert missing.value.code == "not_found" and len(gets.seen) == 2


class AsyncLoseFirstCreate(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.keys: List[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if creates(request):
            self.keys.append(request.headers["idempotency-key"])
            if len(self.keys) == 1:
                await response.aread()
                await response.aclose()
                raise httpx.ReadError("the answer was lost on the way back", request=request)
        return response


def test_the_async_client_retries_a_lost_create_with_its_key(gateway: Dict[str, Any], gw: Client) -> None:
    tag = f"lost-async-{time.time_ns()}"
    transport = AsyncLoseFirstCreate()

    async def main() -> str:
        async with AsyncClient(**gateway, transport=transport) as client:
            sandbox = await client.sandboxes.create("metal/base", metadata={"suite": tag})
            await sandbox.destroy()
            return sandbox.id

    made = asyncio.run(main())
    assert len(transport.keys) == 2 and transport.keys[0] == transport.keys[1]
    assert [s.id for s in gw.sandboxes.list(metadata={"suite": tag}).items] == [made]
    assert json.dumps(gw.sandboxes.get(made).record["metadata"]) == json.dumps({"suite": tag})
