#!/usr/bin/env python3
"""Writes sandbox_gateway/types.py from the gateway's OpenAPI document, so the records the client hands over are
typed exactly as the server sends them (the TypeScript client gets the same from the server's contract).

    python3 scripts/generate_types.py openapi.json          # rewrite sandbox_gateway/types.py
    python3 scripts/generate_types.py openapi.json --check  # exit 1 when it differs (the tests run this)
    bun run --silent openapi | python3 clients/python/scripts/generate_types.py -   # from the repository's root

A running gateway serves the document at /v1/openapi.json; `bun run openapi` prints it. Standard library only.
"""
from __future__ import annotations

import json
import keyword
import re
import sys
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "sandbox_gateway" / "types.py"

# The schemas the client hands over or takes, and (by reference) everything they use.
ROOTS = [
    "SandboxRequest",
    "Sandbox",
    "SandboxList",
    "Operation",
    "Process",
    "Endpoint",
    "SandboxMetrics",
    "Capabilities",
    "RuntimeOperation",
    "EnvironmentList",
    "ErrorObject",
]

HEADER = '''"""The gateway's records as typed dictionaries: generated from its OpenAPI document by
scripts/generate_types.py (do not edit; the tests check it matches the server's)."""
from __future__ import annotations

import sys
from typing import Any, Dict, List, Literal, Optional, TypedDict, Union

if sys.version_info >= (3, 11):
    from typing import NotRequired
else:
    from typing_extensions import NotRequired
'''


def pascal(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", text) if part)


class Generator:
    def __init__(self, document: dict) -> None:
        self.schemas: dict = document["components"]["schemas"]
        self.aliases: dict[str, str] = {}  # name -> "Literal[...]" or "Union[...]" (module-level aliases)
        self.dicts: dict[str, list[tuple[str, str, bool]]] = {}  # name -> fields (key, type, required)
        self.order: list[str] = []
        self.visiting: set[str] = set()

    def ref(self, name: str) -> str:
        """The Python type for a named schema: a class or alias of its own, or the primitive it is."""
        schema = self.schemas[name]
        if name in self.dicts or name in self.aliases or name in self.visiting:
            return name
        if schema.get("type") == "object" and "properties" in schema and schema["properties"]:
            self.visiting.add(name)
            self.object(name, schema)
            self.visiting.discard(name)
            return name
        if "enum" in schema or "anyOf" in schema:
            self.visiting.add(name)
            self.aliases[name] = self.type_of(schema, name)
            self.order.append(name)
            self.visiting.discard(name)
            return name
        return self.type_of(schema, name)

    def object(self, name: str, schema: dict) -> None:
        required = set(schema.get("required", []))
        self.dicts[name] = []
        self.order.append(name)
        fields = [(key, self.type_of(value, name + pascal(key)), key in required) for key, value in schema["properties"].items()]
        self.dicts[name] = fields

    def type_of(self, schema: dict, context: str) -> str:
        if "$ref" in schema:
            return self.ref(schema["$ref"].rsplit("/", 1)[1])
        if "enum" in schema:
            return "Literal[" + ", ".join(json.dumps(v) for v in schema["enum"]) + "]"
        if "anyOf" in schema:
            options = schema["anyOf"]
            nullable = any(o.get("type") == "null" for o in options)
            rest = [o for o in options if o.get("type") != "null"]
            types = []
            for i, option in enumerate(rest):
                kind = option.get("properties", {}).get("kind", {}).get("enum", [])
                label = pascal(kind[0]) if len(kind) == 1 else str(i + 1)
                types.append(self.type_of(option, context + label))
            types = list(dict.fromkeys(types))
            inner = types[0] if len(types) == 1 else "Union[" + ", ".join(types) + "]"
            return f"Optional[{inner}]" if nullable else inner
        kind = schema.get("type")
        if kind == "string":
            return "str"
        if kind == "integer":
            return "int"
        if kind == "number":
            return "float"
        if kind == "boolean":
            return "bool"
        if kind == "null":
            return "None"
        if kind == "array":
            return f"List[{self.type_of(schema.get('items', {}), context)}]"
        if kind == "object":
            if schema.get("properties"):
                self.object(context, schema)
                return context
            values = schema.get("additionalProperties")
            if not isinstance(values, dict):
                values = next(iter(schema.get("patternProperties", {}).values()), {})
            return f"Dict[str, {self.type_of(values, context) if values else 'Any'}]"
        return "Any"

    def render(self) -> str:
        for root in ROOTS:
            self.ref(root)
        out = [HEADER]
        # Literal aliases first (they use nothing), then the dictionaries (their fields are strings under
        # `from __future__ import annotations`), then the unions of dictionaries.
        literals = [n for n in self.order if n in self.aliases and self.aliases[n].startswith("Literal[")]
        unions = [n for n in self.order if n in self.aliases and n not in literals]
        for name in literals:
            out.append(f"{name} = {self.aliases[name]}\n")
        for name in [n for n in self.order if n in self.dicts]:
            fields = self.dicts[name]
            entries = [(key, type_ if required else f"NotRequired[{type_}]") for key, type_, required in fields]
            if any(keyword.iskeyword(key) or not key.isidentifier() for key, _ in entries):
                body = ", ".join(f"{json.dumps(key)}: {json.dumps(type_)}" for key, type_ in entries)
                out.append(f"\n{name} = TypedDict({json.dumps(name)}, {{{body}}})\n")
            else:
                out.append(f"\n\nclass {name}(TypedDict):\n" + "".join(f"    {key}: {type_}\n" for key, type_ in entries))
        if unions:
            out.append("\n")
        for name in unions:
            out.append(f"{name} = {self.aliases[name]}\n")
        return "".join(out)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    document = json.loads(sys.stdin.read() if argv[1] == "-" else Path(argv[1]).read_text())
    text = Generator(document).render()
    if "--check" in argv:
        if TARGET.read_text() != text:
            print(f"{TARGET} is not what the gateway's OpenAPI document makes: run scripts/generate_types.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
