"""The KubeRay manifests in deploy/kuberay are valid for the KubeRay CRDs (pinned, offline)
and keep the promises their comments make: GPU workers the autoscaler can start, a RayJob
with its own volume claim, and an entrypoint that continues a fixed run id."""

from __future__ import annotations

import copy
import json
import shlex
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((REPO / "deploy" / "kuberay").glob("*.yaml"))
CRDS = Path(__file__).resolve().parent / "kuberay_crds"


def _strict(schema: Any) -> Any:
    """``schema`` where every object that lists ``properties`` rejects other keys, as
    ``kubectl apply --validate=strict`` does (the API server would prune them silently)."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _strict(v) for k, v in out["properties"].items()}
        if "additionalProperties" not in out and not out.get(
            "x-kubernetes-preserve-unknown-fields"
        ):
            out["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(out.get(key), dict):
            out[key] = _strict(out[key])
    for key in ("anyOf", "allOf", "oneOf"):
        if key in out:
            out[key] = _strict(out[key])
    return out


@cache
def _validator(kind: str) -> jsonschema.Draft7Validator:
    schema = json.loads((CRDS / f"{kind.lower()}.v1.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft7Validator(_strict(schema))


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]


def _errors(doc: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in _validator(doc["kind"]).iter_errors(doc)
    ]


def _ray_docs() -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{p.name}:{d['kind']}", d)
        for p in MANIFESTS
        for d in _docs(p)
        if d["kind"] in ("RayCluster", "RayJob")
    ]


def _cluster_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"]["rayClusterSpec"] if doc["kind"] == "RayJob" else doc["spec"]


def test_both_kinds_are_shipped():
    kinds = {d["kind"] for _, d in _ray_docs()}
    assert kinds == {"RayCluster", "RayJob"}


@pytest.mark.parametrize(("name", "doc"), _ray_docs(), ids=[n for n, _ in _ray_docs()])
def test_manifest_is_valid_for_the_pinned_kuberay_crd(name, doc):
    assert doc["apiVersion"] == "ray.io/v1"
    assert _errors(doc) == []


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda s: s["workerGroupSpecs"][0].update(rayStartParam={}), "rayStartParam"),
        (lambda s: s["workerGroupSpecs"][-1]["rayStartParams"].update({"num-gpus": 1}), "string"),
        (lambda s: s["workerGroupSpecs"][0].pop("groupName"), "groupName"),
        (lambda s: s["headGroupSpec"]["template"]["spec"].update(container=[]), "container"),
    ],
)
def test_a_broken_manifest_fails_validation(mutate, match):
    for _, doc in _ray_docs():
        bad = copy.deepcopy(doc)
        mutate(_cluster_spec(bad))
        errors = _errors(bad)
        assert errors and any(match in e for e in errors), errors


@pytest.mark.parametrize(("name", "doc"), _ray_docs(), ids=[n for n, _ in _ray_docs()])
def test_gpu_workers_can_be_started_by_the_autoscaler(name, doc):
    spec = _cluster_spec(doc)
    assert spec["enableInTreeAutoscaling"] is True
    groups = {g["groupName"]: g for g in spec["workerGroupSpecs"]}
    gpu = groups["gpu"]
    assert gpu["minReplicas"] == 0 and gpu["maxReplicas"] >= 1
    (container,) = gpu["template"]["spec"]["containers"]
    limit = container["resources"]["limits"]["nvidia.com/gpu"]
    # Ray must advertise exactly the GPUs Kubernetes gives the container.
    assert gpu["rayStartParams"]["num-gpus"] == str(limit) and int(limit) >= 1
    assert container["image"].endswith("-gpu")
    for group in groups.values():
        assert group["minReplicas"] == 0  # scales to zero when idle
        (c,) = group["template"]["spec"]["containers"]
        assert group["rayStartParams"]["num-cpus"] == str(c["resources"]["limits"]["cpu"])
    # The head trains no pods; the driver runs there.
    assert spec["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"


def _claims(doc: dict[str, Any]) -> dict[str, str]:
    """``{volume name: claim name}`` of the head pod."""
    spec = _cluster_spec(doc)["headGroupSpec"]["template"]["spec"]
    return {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in spec.get("volumes", [])
        if "persistentVolumeClaim" in v
    }


def test_the_rayjob_has_its_own_volume_claim():
    by_file = {p.name: _docs(p) for p in MANIFESTS}
    job_docs = by_file["rayjob.yaml"]
    (job,) = [d for d in job_docs if d["kind"] == "RayJob"]
    (cluster,) = [d for d in by_file["raycluster.yaml"] if d["kind"] == "RayCluster"]
    job_claims = set(_claims(job).values())
    declared = {d["metadata"]["name"] for d in job_docs if d["kind"] == "PersistentVolumeClaim"}
    assert job_claims and job_claims <= declared  # the claim ships with the job
    # Never a second head on the long-lived cluster's ReadWriteOnce claim.
    assert not job_claims & set(_claims(cluster).values())
    text = (REPO / "deploy" / "kuberay" / "rayjob.yaml").read_text(encoding="utf-8")
    assert "for the PVC only" not in text


def test_the_rayjob_entrypoint_continues_a_fixed_run_id_on_its_volume():
    (job,) = [
        d for d in _docs(REPO / "deploy" / "kuberay" / "rayjob.yaml") if d["kind"] == "RayJob"
    ]
    args = shlex.split(job["spec"]["entrypoint"])
    assert args[:2] == ["finpod", "train"]
    opts = dict(zip(args[2::2], args[3::2], strict=False))
    assert opts.get("--run-id"), "a restarted job must find its run again by id"
    head = _cluster_spec(job)["headGroupSpec"]["template"]["spec"]
    mounts = {m["mountPath"] for c in head["containers"] for m in c.get("volumeMounts", [])}
    assert opts["--runs"] in mounts  # the run directory is on the claim, not the pod's disk
    assert job["spec"]["backoffLimit"] >= 1  # a failed attempt is retried (and resumes)
