"""What a failed call to the gateway raises: the error envelope's fields, typed."""
from __future__ import annotations

from typing import Any, Optional


class GatewayError(Exception):
    """A failure the gateway reported (its envelope ``{code, message, request_id, retryable, details}``), or one
    on the way to it (``network_error``, status 0).

    ``retryable`` says the same request may be sent again unchanged (with the same Idempotency-Key): the client
    already did, up to its ``attempts``.
    """

    def __init__(
        self,
        code: str,
        message: str,
        status: int = 0,
        retryable: bool = False,
        details: Any = None,
        request_id: Optional[str] = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.status = status
        self.retryable = retryable
        self.details = details
        self.request_id = request_id

    def __str__(self) -> str:
        where = f" (HTTP {self.status})" if self.status else ""
        return f"{self.code}: {self.message}{where}"

    def __repr__(self) -> str:
        return f"GatewayError(code={self.code!r}, status={self.status}, retryable={self.retryable}, message={self.message!r})"


def from_envelope(status: int, body: Any, request_id: Optional[str] = None) -> GatewayError:
    """The gateway's envelope as it arrives in a response body; anything else is reported by its status."""
    b = body if isinstance(body, dict) else {}
    code = b.get("code")
    message = b.get("message")
    retryable = b.get("retryable")
    rid = b.get("request_id")
    return GatewayError(
        code if isinstance(code, str) else f"http_{status}",
        message if isinstance(message, str) else f"The gateway answered {status}",
        status,
        retryable if isinstance(retryable, bool) else status >= 500 or status == 429,
        b.get("details"),
        rid if isinstance(rid, str) else request_id,
    )


def network_error(error: BaseException) -> GatewayError:
    """A request that got no answer: retryable (with the same Idempotency-Key, a create is made at most once)."""
    return GatewayError("network_error", f"The gateway could not be reached: {error or type(error).__name__}", 0, True)
