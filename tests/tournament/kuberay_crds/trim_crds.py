"""Rebuild the trimmed KubeRay schemas here from a KubeRay checkout (run by hand).

    git clone --branch v1.4.2 https://github.com/ray-project/kuberay
    python tests/tournament/kuberay_crds/trim_crds.py kuberay/ray-operator/config/crd/bases

For each CRD it keeps the ``v1`` version's ``openAPIV3Schema``, drops every
``description`` and the ``status`` subtree (the manifests never set it) and writes compact
JSON with sorted keys. Nothing else is changed: the validation rules are KubeRay's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
KINDS = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}


def strip(node: Any) -> Any:
    """``node`` without ``description`` keys, recursively."""
    if isinstance(node, dict):
        return {k: strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [strip(v) for v in node]
    return node


def main(bases: Path) -> None:
    for kind, name in KINDS.items():
        crd = yaml.safe_load((bases / name).read_text(encoding="utf-8"))
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        schema = strip(version["schema"]["openAPIV3Schema"])
        schema["properties"].pop("status", None)
        out = HERE / f"{kind.lower()}.v1.schema.json"
        out.write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n")
        print(out, out.stat().st_size)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
