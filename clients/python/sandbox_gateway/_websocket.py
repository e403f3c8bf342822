"""A small RFC 6455 client on asyncio streams, for the terminal attach (`GET …/processes/{id}/attach`).

Standard library only, so the package needs nothing beyond httpx: Debian's python3-websockets (10.4) has no sync
client and its headers argument was renamed in later releases; a terminal needs just this much. A refused upgrade
is read as the API's answer (the error envelope), which a WebSocket library would hide.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import ssl as ssl_module
import struct
from typing import Dict, Optional, Tuple
from urllib.parse import urlsplit

from .errors import GatewayError, from_envelope

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
CONTINUATION, TEXT, BINARY, CLOSE, PING, PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA
#: The largest message taken from the gateway (its frames are at most 1 MiB of output).
MAX_MESSAGE = 16 * 1024 * 1024
MAX_HEAD = 64 * 1024


class ConnectionClosed(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(f"closed {code} {reason}")
        self.code = code
        self.reason = reason


class WebSocket:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()
        self.closed = False
        self._close_sent = False

    async def send(self, opcode: int, payload: bytes) -> None:
        async with self._lock:
            if self._close_sent:
                raise ConnectionClosed(1006, "the connection is closing")
            if opcode == CLOSE:
                self._close_sent = True
            self._writer.write(_frame(opcode, payload))
            await self._writer.drain()

    async def close(self, code: int = 1000, reason: str = "") -> None:
        try:
            await self.send(CLOSE, struct.pack("!H", code) + reason.encode()[:120])
        except (ConnectionClosed, ConnectionError, OSError):
            pass

    async def recv(self) -> Tuple[int, bytes]:
        """The next message (TEXT or BINARY, reassembled); a close frame raises ConnectionClosed."""
        message = bytearray()
        kind = None
        while True:
            try:
                fin, opcode, payload = await self._read_frame()
            except (asyncio.IncompleteReadError, ConnectionError, OSError):
                self.abort()
                raise ConnectionClosed(1006, "the connection dropped")
            if opcode == PING:
                await self.send(PONG, payload)
                continue
            if opcode == PONG:
                continue
            if opcode == CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005
                reason = payload[2:].decode("utf-8", "replace")
                if not self._close_sent:
                    await self.close(code if code not in (1005, 1006) else 1000)
                self.abort()
                raise ConnectionClosed(code, reason)
            if opcode in (TEXT, BINARY):
                kind = opcode
                message = bytearray(payload)
            elif opcode == CONTINUATION and kind is not None:
                message += payload
            else:
                await self._fail(1002, "unexpected frame")
            if len(message) > MAX_MESSAGE:
                await self._fail(1009, "message too big")
            if fin and kind is not None:
                return kind, bytes(message)

    async def _read_frame(self) -> Tuple[bool, int, bytes]:
        head = await self._reader.readexactly(2)
        fin = bool(head[0] & 0x80)
        opcode = head[0] & 0x0F
        masked = bool(head[1] & 0x80)
        length = head[1] & 0x7F
        if length == 126:
            length = struct.unpack("!H", await self._reader.readexactly(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", await self._reader.readexactly(8))[0]
        if length > MAX_MESSAGE:
            await self._fail(1009, "frame too big")
        mask = await self._reader.readexactly(4) if masked else None
        payload = await self._reader.readexactly(length)
        return fin, opcode, _unmask(payload, mask) if mask else payload

    async def _fail(self, code: int, reason: str) -> None:
        await self.close(code, reason)
        self.abort()
        raise ConnectionClosed(code, reason)

    def abort(self) -> None:
        if not self.closed:
            self.closed = True
            self._writer.close()


def _unmask(payload: bytes, mask: bytes) -> bytes:
    n = len(payload)
    key = int.from_bytes((mask * (n // 4 + 1))[:n], "big")
    return (int.from_bytes(payload, "big") ^ key).to_bytes(n, "big")


def _frame(opcode: int, payload: bytes) -> bytes:
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    return head + mask + _unmask(payload, mask)


async def connect(url: str, headers: Dict[str, str], ssl_context: Optional[ssl_module.SSLContext] = None, timeout: float = 30.0) -> WebSocket:
    """Opens the WebSocket; a refused upgrade raises the gateway's answer as a GatewayError."""
    parts = urlsplit(url)
    secure = parts.scheme in ("wss", "https")
    host = parts.hostname or "localhost"
    port = parts.port or (443 if secure else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    context = (ssl_context or ssl_module.create_default_context()) if secure else None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=context, server_hostname=host if secure else None, limit=MAX_HEAD),
            timeout,
        )
    except (OSError, asyncio.TimeoutError) as e:
        raise GatewayError("network_error", f"The gateway could not be reached: {e or type(e).__name__}", 0, True)
    key = base64.b64encode(os.urandom(16)).decode()
    host_header = parts.netloc.rsplit("@", 1)[-1]
    lines = [
        f"GET {target} HTTP/1.1",
        f"Host: {host_header}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        f"Sec-WebSocket-Key: {key}",
        "Sec-WebSocket-Version: 13",
        *(f"{name}: {value}" for name, value in headers.items()),
    ]
    try:
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split(" ", 2)[1])
        answer = {}
        for line in header_lines:
            if ":" in line:
                name, value = line.split(":", 1)
                answer[name.strip().lower()] = value.strip()
        if status != 101:
            length = min(int(answer.get("content-length", "0") or 0), 1024 * 1024)
            body = await asyncio.wait_for(reader.readexactly(length), timeout) if length else b""
            writer.close()
            try:
                parsed = json.loads(body) if body else None
            except ValueError:
                parsed = None
            raise from_envelope(status, parsed, answer.get("x-request-id"))
        expected = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        if answer.get("sec-websocket-accept") != expected:
            writer.close()
            raise GatewayError("attach_refused", "The gateway's WebSocket answer did not match the request", 0, False)
    except GatewayError:
        raise
    except (OSError, ValueError, IndexError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.TimeoutError) as e:
        writer.close()
        raise GatewayError("attach_refused", f"The terminal could not be attached: {e or type(e).__name__}", 0, True)
    return WebSocket(reader, writer)
