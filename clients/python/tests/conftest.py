"""The Python client's tests run against a real gateway: test/client/python.test.ts starts one, installs the package
into a virtual environment and runs this suite with SGW_URL, SGW_API_KEY and SGW_PROJECT set (and SGW_SOURCE, the
package's source, for the checks that the generated files are current)."""
from __future__ import annotations

import os
from typing import Any, Dict, Iterator

import pytest

from sandbox_gateway import Client


def setting(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        pytest.exit(f"{name} is not set: these tests run against a gateway (test/client/python.test.ts starts one)", 2)
    return value


@pytest.fixture(scope="session")
def gateway() -> Dict[str, Any]:
    return {"base_url": setting("SGW_URL"), "api_key": setting("SGW_API_KEY"), "project_id": setting("SGW_PROJECT")}


@pytest.fixture(scope="session")
def gw(gateway: Dict[str, Any]) -> Iterator[Client]:
    with Client(**gateway) as client:
        yield client
