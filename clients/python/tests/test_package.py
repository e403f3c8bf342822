"""The package as installed: it is the one in the environment (not the source tree), its version is the gateway's,
it is typed, and its generated parts are current (the sync client made from the async one, the records from the
gateway's OpenAPI document)."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Dict

import httpx

import sandbox_gateway


def test_installed_typed_and_versioned_with_the_api(gateway: Dict[str, Any]) -> None:
    installed = Path(sandbox_gateway.__file__).resolve().parent
    assert Path(sys.prefix).resolve() in installed.parents, f"imported from {installed}, not the environment {sys.prefix}"
    assert (installed / "py.typed").exists()
    meta = httpx.get(gateway["base_url"] + "/v1/meta").json()
    assert sandbox_gateway.__version__ == meta["version"]


def source() -> Path:
    value = os.environ.get("SGW_SOURCE")
    assert value, "SGW_SOURCE (the package's source) is not set"
    return Path(value)


def test_the_sync_client_is_the_async_one_generated() -> None:
    subprocess.run([sys.executable, str(source() / "scripts" / "unasync.py"), "--check"], check=True)


def test_the_records_are_typed_as_the_gateway_sends_them(gateway: Dict[str, Any]) -> None:
    with tempfile.NamedTemporaryFile("wb", suffix=".json") as document:
        document.write(httpx.get(gateway["base_url"] + "/v1/openapi.json").content)
        document.flush()
        subprocess.run([sys.executable, str(source() / "scripts" / "generate_types.py"), document.name, "--check"], check=True)


def test_typed_for_mypy(tmp_path: Path) -> None:
    """The package type-checks strictly, and so does this suite, which uses it as a caller would (the installed
    copy is the same source, and carries py.typed: see the first test)."""
    # A cache kept between runs (SGW_MYPY_CACHE) spares the standard library's and httpx's analysis each time.
    cache = ["--cache-dir", os.environ.get("SGW_MYPY_CACHE") or str(tmp_path / "mypy")]
    subprocess.run([sys.executable, "-m", "mypy", "--strict", *cache, str(source() / "sandbox_gateway"), str(Path(__file__).parent)], check=True, cwd=tmp_path)
