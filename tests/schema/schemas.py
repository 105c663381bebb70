"""The JSON Schemas of iommuctl's --json output (docs/schema), loaded for validation.

    import schemas
    problems = schemas.problems("status", document)   # [] when it is valid

Shared by tests/schema/test_schemas.py, tests/vm/check_status.py and the umockdev tests. Needs
python3-jsonschema (Debian 12: 4.10, draft 2020-12); newer releases resolve references through
the `referencing` package instead of RefResolver, and both are handled here."""

import json
from pathlib import Path

import jsonschema
from jsonschema import Draft202012Validator

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "docs" / "schema"
NAMES = ("status", "plan", "explain", "device")  # the documents the synthetic-host corpus covers
ALL = NAMES + ("top", "verify")  # top: on recordings from tests/vm; verify: on roots with records (test_schemas)


def load(name: str) -> dict:
    return json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())


def _all() -> dict[str, dict]:
    return {name: load(name) for name in ALL}


def validator(name: str) -> Draft202012Validator:
    """A validator of one schema that resolves references to the others ("plan.schema.json#/$defs/change")."""
    docs = _all()
    try:
        from referencing import Registry, Resource  # jsonschema >= 4.18

        registry = Registry().with_resources((d["$id"], Resource.from_contents(d)) for d in docs.values())
        return Draft202012Validator(docs[name], registry=registry)
    except ImportError:
        store = {d["$id"]: d for d in docs.values()}
        resolver = jsonschema.RefResolver.from_schema(docs[name], store=store)
        return Draft202012Validator(docs[name], resolver=resolver)


_cache: dict[str, Draft202012Validator] = {}


def problems(name: str, document) -> list[str]:
    """Every way `document` breaks schema `name`, one line each ("at /devices/0/kind: ...")."""
    if name not in _cache:
        _cache[name] = validator(name)
    out = []
    for e in sorted(_cache[name].iter_errors(document), key=lambda e: list(map(str, e.absolute_path))):
        where = "/" + "/".join(str(p) for p in e.absolute_path)
        out.append(f"at {where}: {e.message[:300]}")
    return out
