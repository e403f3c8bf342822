"""The sync client against a real gateway: create-and-wait, commands (one call, live output, stdin), files (raw
routes, streams both ways), endpoints, terminals, the lifecycle and listing."""
from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Callable, Dict, Iterator, List, Tuple

import httpx
import pytest

from sandbox_gateway import Client, EndedTerminal, GatewayError, Sandbox, Terminal, TerminalExit


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    for _ in range(1500):
        if predicate():
            return
        time.sleep(0.01)
    raise AssertionError(f"never happened: {what}")


def state_of(sandbox: Sandbox) -> str:
    """The state the handle holds now (a function: the type checker keeps no narrowing across the calls that change it)."""
    return sandbox.state


def test_create_run_files_endpoint_lifecycle(gw: Client) -> None:
    tag = f"py-{os.getpid()}-{time.time_ns()}"
    environments = {e["name"]: e for e in gw.environments.list()}
    assert environments["metal/python"]["default_version"] == "latest" and "e2b" in environments["metal/python"]["providers"]
    sandbox = gw.sandboxes.create("metal/python", metadata={"suite": tag}, features={"public_ports": [8000], "pause_resume": True})
    assert isinstance(sandbox, Sandbox)
    assert sandbox.state == "ready" and sandbox.record["metadata"] == {"suite": tag}

    # One call: its exit code and output (bytes that are not UTF-8: tests/test_async.py).
    result = sandbox.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.state, result.exit_code, result.stdout, result.stderr) == ("failed", 3, "out\n", "err\n")
    assert sandbox.run("echo $((6 * 7))").stdout == "42\n"  # a string is a shell line
    # 1.5 MiB is past the one-call answer's 1 MiB: the rest is read from the events, whole.
    assert sandbox.run("head -c 1572864 /dev/zero | tr '\\0' x").stdout == "x" * 1572864

    # Live output: the command waits for a file written only once its first line was seen here; without live
    # output exec would hand nothing over before the end, and the command would run into its timeout.
    seen: List[Tuple[str, str]] = []

    def on_output(stream: str, text: str) -> None:
        seen.append((stream, text))
        if "first" in text:
            sandbox.files.write("/workspace/go", "")

    live = sandbox.exec(["sh", "-c", "echo first; while [ ! -f /workspace/go ]; do sleep 0.05; done; echo second >&2; exit 7"], on_output=on_output, timeout=60)
    assert seen == [("stdout", "first\n"), ("stderr", "second\n")]
    assert (live.state, live.exit_code, live.stdout, live.stderr) == ("failed", 7, "first\n", "second\n")

    # Files on the raw routes: bytes in and out, a range, create refusing an existing file, a listing, a delete.
    blob = os.urandom(200_000)
    assert sandbox.files.write("/workspace/data/blob.bin", blob) == len(blob)
    assert sandbox.files.read("/workspace/data/blob.bin") == blob
    assert sandbox.files.read("/workspace/data/blob.bin", start=10, end=19) == blob[10:20]
    assert sandbox.files.size("/workspace/data/blob.bin") == len(blob)
    with pytest.raises(GatewayError) as exists:
        sandbox.files.write("/workspace/data/blob.bin", "x", mode="create")
    assert (exists.value.code, exists.value.status, exists.value.retryable) == ("file_exists", 409, False)
    with pytest.raises(GatewayError) as sideways:
        sandbox.files.write("/workspace/data/blob.bin", "x", mode="sideways")  # type: ignore[arg-type]
    assert (sideways.value.code, sideways.value.status) == ("validation_error", 422) and "mode" in sideways.value.message
    assert sandbox.files.read("/workspace/data/blob.bin") == blob  # neither refusal touched it
    assert [e["path"] for e in sandbox.files.list("/workspace/data")] == ["/workspace/data/blob.bin"]
    assert sandbox.files.remove("/workspace/data/blob.bin") is True
    with pytest.raises(GatewayError) as missing:
        sandbox.files.read("/workspace/data/blob.bin")
    assert (missing.value.code, missing.value.status) == ("file_not_found", 404)
    assert missing.value.request_id and missing.value.request_id.startswith("req_")

    # An endpoint: a server started in the background, served at a URL once active.
    sandbox.files.write("/workspace/site/index.html", "hello from the sandbox")
    server = sandbox.start(["python3", "-m", "http.server", "8000", "--directory", "/workspace/site"], timeout=600)
    endpoint = sandbox.expose(8000, lease_seconds=600)
    assert endpoint["state"] == "active"
    body = ""
    for _ in range(200):
        try:
            answer = httpx.get(endpoint["url"], timeout=10)
            if answer.status_code == 200:
                body = answer.text
                break
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    assert body == "hello from the sandbox"
    server.cancel()
    assert server.wait().state == "cancelled"

    # Listing with filters finds it; the lifecycle moves it.
    assert [s.id for s in gw.sandboxes.list(state=["ready", "paused"], metadata={"suite": tag}).items] == [sandbox.id]
    assert gw.sandboxes.list(state="stopped", metadata={"suite": tag}).items == []
    assert sandbox.extend(1200)["expires_at"] is not None
    assert sandbox.metrics()["source"] == "local_runtime"
    sandbox.pause()
    assert state_of(sandbox) == "paused"
    with pytest.raises(GatewayError) as paused:
        sandbox.run("true")
    assert (paused.value.code, paused.value.status) == ("invalid_sandbox_state", 409)
    sandbox.resume()
    assert state_of(sandbox) == "ready" and sandbox.run("echo back").stdout == "back\n"
    sandbox.destroy()
    assert state_of(sandbox) == "stopped" and gw.sandboxes.get(sandbox.id).state == "stopped"


def test_stdin_and_files_of_any_size(gw: Client) -> None:
    sandbox = gw.sandboxes.create("metal/base", provider="e2b")  # a provider that takes standard input
    try:
        assert sandbox.exec(["wc", "-c"], stdin="hello").stdout.strip() == "5"

        def parts() -> Iterator[bytes]:
            for i in range(3):
                yield f"part {i}\n".encode()

        assert sandbox.exec(["cat"], stdin=parts()).stdout == "part 0\npart 1\npart 2\n"
        big = bytes((97 + i % 26) for i in range(2_500_000))  # more than one call's worth (1 MiB)
        assert sandbox.exec(["sha256sum"], stdin=big).stdout.split()[0] == hashlib.sha256(big).hexdigest()

        # A process fed by hand.
        process = sandbox.start(["python3", "-c", "import sys; print(sum(int(l) for l in sys.stdin))"], stdin=True)
        process.write("1\n2\n")
        process.write(b"39\n", eof=True)
        assert process.wait().stdout == "42\n"

        # 12 MiB streamed up from a generator in 1 MiB pieces, then streamed down, with progress both ways.
        data = os.urandom(12 * 1024 * 1024 + 7)
        sent: List[int] = []
        assert sandbox.files.upload("/workspace/big.bin", (data[i : i + 300_000] for i in range(0, len(data), 300_000)), piece_bytes=1024 * 1024, on_progress=sent.append) == len(data)
        assert sent[-1] == len(data) and len(sent) == 13
        progress: List[Tuple[int, object]] = []
        received = b"".join(sandbox.files.download("/workspace/big.bin", on_progress=lambda n, total: progress.append((n, total))))
        assert hashlib.sha256(received).digest() == hashlib.sha256(data).digest()
        assert progress[0] == (0, len(data)) and progress[-1] == (len(data), len(data))
        # An empty file downloads as nothing; upload takes a binary file too.
        sandbox.files.write("/workspace/empty", b"")
        assert b"".join(sandbox.files.download("/workspace/empty")) == b""
        with open(__file__, "rb") as source:
            assert sandbox.files.upload("/workspace/copy.py", source) == os.path.getsize(__file__)
        with open(__file__, "rb") as source:
            assert sandbox.files.read("/workspace/copy.py") == source.read()
    finally:
        sandbox.destroy()


def test_terminals(gw: Client) -> None:
    sandbox = gw.sandboxes.create("metal/base", features={"pty": True})  # placed on a provider with terminals
    try:
        output: List[str] = []
        exits: List[TerminalExit] = []
        shell = sandbox.shell(cols=80, rows=24, on_output=output.append, on_exit=exits.append)
        assert isinstance(shell, Terminal)
        shell.write("echo sum=$((40+2)); stty size\n")
        wait_for(lambda: "sum=42\r\n24 80\r\n" in "".join(output), "the first answer")
        shell.resize(132, 43)
        shell.write(b"stty size\n")
        wait_for(lambda: "43 132\r\n" in "".join(output), "the resize")
        shell.write("exit 3\n")
        assert shell.wait(60) == TerminalExit("failed", 3)
        assert exits == [TerminalExit("failed", 3)]
        with pytest.raises(GatewayError) as closed:
            shell.write("more\n")
        assert closed.value.code == "attach_closed"

        # Leaving a terminal leaves its process running; attaching again replays its output and goes on.
        first: List[str] = []
        term = sandbox.terminal(["sh", "-c", "echo ready; read line; echo got-$line; exit 0"], on_output=first.append)
        wait_for(lambda: "ready" in "".join(first), "ready")
        term.close()
        with pytest.raises(GatewayError) as left:
            term.wait(60)
        assert left.value.code == "attach_closed"
        second: List[str] = []
        raw: List[bytes] = []
        again = sandbox.attach(term.process_id, on_output=second.append, on_data=raw.append)
        again.write("yes\n")
        assert again.wait(60) == TerminalExit("succeeded", 0)
        assert "ready" in "".join(second) and "got-yes" in "".join(second)
        assert b"".join(raw).decode() == "".join(second)

        # A process that ended before the attach: its output and its end, at once.
        quick = sandbox.terminal(["sh", "-c", "echo quick-$((2*3)); exit 4"])
        assert quick.wait(60) == TerminalExit("failed", 4)
        replay: List[str] = []
        late = sandbox.attach(quick.process_id, on_output=replay.append)
        assert isinstance(late, EndedTerminal)
        assert late.wait() == TerminalExit("failed", 4) and "quick-6" in "".join(replay)
        with pytest.raises(GatewayError) as ended:
            late.write("x")
        assert ended.value.code == "invalid_process_state"
    finally:
        sandbox.destroy()
