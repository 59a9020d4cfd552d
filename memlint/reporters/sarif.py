"""SARIF 2.1.0 for code scanning: rules from the catalog, results with regions and
fingerprints that stay stable when unrelated lines move."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from memlint import __version__
from memlint.catalog import load_catalog

_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _uri(path: str) -> str:
    """Repository-relative (cwd-relative) POSIX path where possible."""
    p = Path(path)
    if p.is_absolute():
        try:
            p = p.relative_to(Path.cwd())
        except ValueError:
            pass
    return p.as_posix()


def _fingerprint(diag) -> str:
    basis = f"{diag.code}|{_uri(diag.path)}|{diag.model or ''}|{diag.message.split(':')[0]}"
    return hashlib.sha256(basis.encode()).hexdigest()[:32]


def document(reports: list, diff=None) -> dict:
    catalog = load_catalog()
    rules = [{
        "id": code,
        "name": rule["name"],
        "shortDescription": {"text": rule["summary"].strip()},
        "fullDescription": {"text": rule["explanation"].strip()},
        "help": {"text": (rule.get("fix") or rule["summary"]).strip()},
        "defaultConfiguration": {"level": _LEVEL[rule["severity"]]},
    } for code, rule in catalog.items()]
    index = {code: i for i, code in enumerate(catalog)}
    results = []
    for report in reports:
        for d in report.diagnostics:
            physical = {"artifactLocation": {"uri": _uri(d.path)}}
            location = {"physicalLocation": physical}
            if d.node is not None:  # a graph file: the node is the place, there are no lines
                location["logicalLocations"] = [{"name": d.node, "kind": "function",
                                                 "fullyQualifiedName": f"{d.model}/{d.node}"
                                                 if d.model else d.node}]
            else:
                region = {"startLine": max(d.line, 1), "startColumn": max(d.column, 1)}
                if d.end_line:
                    region["endLine"] = d.end_line
                if d.end_column and (d.end_line in (None, d.line)):
                    region["endColumn"] = d.end_column
                physical["region"] = region
            results.append({
                "ruleId": d.code,
                "ruleIndex": index.get(d.code, 0),
                "level": _LEVEL[d.severity],
                "message": {"text": d.message},
                "locations": [location],
                "partialFingerprints": {"memlintFingerprint/v1": _fingerprint(d)},
            })
    run = {"tool": {"driver": {"name": "memlint", "version": __version__,
                               "informationUri": "https://pypi.org/project/memlint/",
                               "rules": rules}},
           "results": results}
    if diff is not None:  # check --diff BASE: the models against the base revision
        run["properties"] = {"memlintDiff": diff.as_dict()}
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def render_check(reports: list, errors: list, options) -> str:
    return json.dumps(document(reports, getattr(options, "memory_diff", None)), indent=2) + "\n"


render_report = render_check
