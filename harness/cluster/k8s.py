"""Kubernetes: one batch/v1 Job per cell, the GPU type chosen by the node label nvidia.com/gpu.product
(set by NVIDIA's GPU feature discovery), the env's image from envs/<env>/Dockerfile, records on a
PersistentVolumeClaim mounted at /results. Rendered only: applying them is `kubectl apply -f DIR`.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from harness.cluster.matrix import Cell, Matrix
from harness.record.files import write_atomic

GPU_LABEL = "nvidia.com/gpu.product"
RESULTS_MOUNT = "/results"


def _dns_label(text: str, limit: int = 63) -> str:
    """A valid DNS-1123 label (Job names are one): lowercase alphanumerics and '-', at most 63."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return label[:limit].rstrip("-")


def job_name(matrix: Matrix, cell: Cell) -> str:
    # The matrix id ends in its hash: keep that whole and shorten the plan name in front if needed.
    suffix = _dns_label(f"{matrix.id.rsplit('-', 1)[-1]}-{cell.env}-{cell.gpu}")
    return _dns_label(f"harness-{matrix.plan}", 62 - len(suffix)) + "-" + suffix


def job(matrix: Matrix, cell: Cell) -> dict:
    k8s = matrix.config["k8s"]
    labels = {"app.kubernetes.io/name": "gpt-harness", "gpt-harness/matrix": _dns_label(matrix.id),
              "gpt-harness/env": _dns_label(cell.env), "gpt-harness/gpu": _dns_label(cell.gpu)}
    metadata = {"name": job_name(matrix, cell), "labels": labels}
    if k8s["namespace"]:
        metadata["namespace"] = k8s["namespace"]
    out = f"{RESULTS_MOUNT}/{cell.env}/{cell.gpu}"
    container = {
        "name": "harness",
        "image": k8s["image"].format(env=cell.env),
        "command": ["python", "-m", "harness.run"],
        "args": [*matrix.run_args, "--env", cell.env, "--out", out],
        "resources": {"requests": {"cpu": str(k8s["cpu"]), "memory": str(k8s["memory"])},
                      "limits": {"nvidia.com/gpu": 1, "memory": str(k8s["memory"])}},
        "volumeMounts": [{"name": "results", "mountPath": RESULTS_MOUNT}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "backoffLimit": 0,  # a failed measurement is looked at, not retried blindly (records never overwrite)
            "template": {
                "metadata": {"labels": dict(labels)},  # a copy: no YAML anchor in the file
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {GPU_LABEL: k8s["gpu_products"][cell.gpu]},
                    "containers": [container],
                    "volumes": [{"name": "results", "persistentVolumeClaim": {"claimName": k8s["results_pvc"]}}],
                },
            },
        },
    }


def render(matrix: Matrix, out_dir: Path) -> list[Path]:
    """One file per cell: DIR/<job name>.yaml."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for cell in matrix.cells:
        manifest = job(matrix, cell)
        path = out_dir / f"{manifest['metadata']['name']}.yaml"
        write_atomic(path, f"# gpt-harness matrix {matrix.id}: {cell.name}\n" + yaml.safe_dump(manifest, sort_keys=False))
        paths.append(path)
    return paths
