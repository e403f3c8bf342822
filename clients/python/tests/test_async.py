"""The async client against a real gateway: the same calls awaited, async iterators both ways, a terminal, and
work on several sandboxes at once."""
from __future__ import annotations

import asyncio
import hashlib
import os
from typing import Any, AsyncIterator, Coroutine, Dict, List, Tuple

import pytest

from sandbox_gateway import AsyncClient, AsyncSandbox, AsyncTerminal, GatewayError, TerminalExit


def run(coroutine: Coroutine[Any, Any, None]) -> None:
    asyncio.run(asyncio.wait_for(coroutine, 300))


def test_async_create_run_live_output_files_destroy(gateway: Dict[str, Any]) -> None:
    async def main() -> None:
        async with AsyncClient(**gateway) as gw:
            # Two sandboxes made and used at the same time.
            first, second = await asyncio.gather(gw.sandboxes.create("metal/python"), gw.sandboxes.create("metal/base"))
            assert isinstance(first, AsyncSandbox) and first.state == second.state == "ready"
            a, b = await asyncio.gather(first.run(["python3", "-c", "print(6 * 7)"]), second.run("echo $0"))
            assert (a.exit_code, a.stdout, b.stdout) == (0, "42\n", "sh\n")
            # Bytes that are not UTF-8 come exactly beside the text (where the provider hands over bytes, as the
            # one a plain request is placed on does).
            c = await second.run("printf 'caf\\351' >&2")
            assert c.stderr_bytes == b"caf\xe9" and c.stderr == "caf\ufffd" and c.stdout_bytes == b""

            seen: List[Tuple[str, str]] = []
            released: List["asyncio.Future[int]"] = []

            def on_output(stream: str, text: str) -> None:
                seen.append((stream, text))
                if "first" in text:
                    released.append(asyncio.ensure_future(first.files.write("/workspace/go", "")))

            live = await first.exec(["sh", "-c", "echo first; while [ ! -f /workspace/go ]; do sleep 0.05; done; echo second >&2"], on_output=on_output, timeout=60)
            await asyncio.gather(*released)
            assert seen == [("stdout", "first\n"), ("stderr", "second\n")] and live.exit_code == 0

            data = os.urandom(3 * 1024 * 1024 + 11)

            async def pieces() -> AsyncIterator[bytes]:
                for at in range(0, len(data), 256 * 1024):
                    yield data[at : at + 256 * 1024]

            assert await first.files.upload("/workspace/up.bin", pieces(), piece_bytes=1024 * 1024) == len(data)
            digest = hashlib.sha256()
            async for chunk in first.files.download("/workspace/up.bin"):
                digest.update(chunk)
            assert digest.digest() == hashlib.sha256(data).digest()
            assert await first.files.read_text("/workspace/go") == ""

            with pytest.raises(GatewayError) as missing:
                await gw.sandboxes.get("sbx_doesnotexist")
            assert (missing.value.code, missing.value.status) == ("not_found", 404)

            await asyncio.gather(first.destroy(), second.destroy())
            assert [s.record["state"] for s in (first, second)] == ["stopped", "stopped"]

    run(main())


def test_async_terminal_and_stdin(gateway: Dict[str, Any]) -> None:
    async def main() -> None:
        async with AsyncClient(**gateway) as gw:
            sandbox = await gw.sandboxes.create("metal/base", features={"pty": True})
            try:
                output: List[str] = []
                term = await sandbox.terminal(["sh", "-c", "read x; echo got-$x; exit 5"], on_output=output.append)
                assert isinstance(term, AsyncTerminal)
                await term.write("yo\n")
                assert await term.wait() == TerminalExit("failed", 5)
                assert "got-yo" in "".join(output)
            finally:
                await sandbox.destroy()
            fed = await gw.sandboxes.create("metal/base", provider="e2b")
            try:
                async def lines() -> AsyncIterator[bytes]:
                    for i in range(3):
                        yield f"{i}\n".encode()

                assert (await fed.exec(["cat"], stdin=lines())).stdout == "0\n1\n2\n"
            finally:
                await fed.destroy()

    run(main())
