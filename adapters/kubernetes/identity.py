"""How a Kubernetes object says it belongs to the control plane, to which workload and plan.

Kubernetes keeps labels and annotations, so the identity travels on every object we
create (a batch/v1 Job, its pod template, or each pod of a gang):

labels (selectable, values at most 63 characters)::

    controlplane.io/managed: "true"          every object of ours: observe selects on it
    controlplane.io/project: chem            who it is for, readable in kubectl
    controlplane.io/workload: md-run
    controlplane.io/submission: chem-md-run-3f9c2a7b1e   the submission: one snapshot job

annotations (free text)::

    controlplane.io/id: chem/md-run          the workload identity (project/name)
    controlplane.io/plan: <plan id>          the plan that created it
    controlplane.io/spec-digest: <16 hex>    digest of what was submitted (request below)
    controlplane.io/request: {...}           the submit details, so a move can rebuild it
    controlplane.io/replicas: "2"            the gang's size; replica: its index

An object is ours only if the managed label is there *and* the identity annotation
parses and agrees with the project and workload labels, so an object that merely copied
one label is still somebody else's and is never touched.

Names are deterministic (:func:`submission_name`): the same workload submitted by the
same plan always gets the same name, so a rerun of an interrupted apply meets its own
objects (the API server answers 409 AlreadyExists) instead of creating more. The key is
the plan id today; :func:`idempotency_key` is the one place that says so, so keying on a
workload's spec digest instead changes one function, not the object layout.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DOMAIN = "controlplane.io"
MANAGED = f"{DOMAIN}/managed"
PROJECT = f"{DOMAIN}/project"
WORKLOAD = f"{DOMAIN}/workload"
SUBMISSION = f"{DOMAIN}/submission"
ID = f"{DOMAIN}/id"
PLAN = f"{DOMAIN}/plan"
SPEC_DIGEST = f"{DOMAIN}/spec-digest"
REQUEST = f"{DOMAIN}/request"
REPLICAS = f"{DOMAIN}/replicas"
REPLICA = f"{DOMAIN}/replica"
CANDIDATE = f"{DOMAIN}/candidate"
POOL = f"{DOMAIN}/pool"

OURS = f"{MANAGED}=true"  # label selector: every object of ours
NOT_OURS = f"{MANAGED}!=true"  # without the label, or with another value

_UNSAFE = re.compile(r"[^a-z0-9-]+")
STEM_MAX = 40  # + "-" + 10 hex = 51, so gang pods "-NNN" stay within a 63-character label


@dataclass(frozen=True)
class Identity:
    """Who an object of ours belongs to, read back from its metadata."""

    workload: str  # project/name
    submission: str  # the submission name (a Job's name; the stem of a gang's pod names)
    plan_id: str | None = None
    spec_digest: str | None = None
    candidate: str | None = None
    pool: str | None = None
    replicas: int | None = None
    request: Mapping[str, Any] | None = None  # the submit details, as JSON


def idempotency_key(plan_id: str, candidate: str | None = None) -> str:
    """What makes two submissions "the same": one per plan (and fan-out candidate)."""
    return plan_id if candidate is None else f"{plan_id}/{candidate}"


def submission_name(workload: str, key: str) -> str:
    """``chem/md-run`` + key -> ``chem-md-run-3f9c2a7b1e``: a DNS-1123 label, readable,
    unique per (workload, key) through the hash of both."""
    stem = _UNSAFE.sub("-", workload.lower().replace("/", "-")).strip("-")[:STEM_MAX].strip("-")
    digest = hashlib.sha256(f"{workload}\n{key}".encode()).hexdigest()[:10]
    return f"{stem or 'w'}-{digest}"


def pod_name(submission: str, index: int) -> str:
    return f"{submission}-{index}"


def digest_of(request: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:16]


def metadata_for(ident: Identity, *, replica: int | None = None) -> dict[str, dict[str, str]]:
    """The labels and annotations of an object of ``ident``'s submission."""
    project, _, name = ident.workload.partition("/")
    labels = {
        MANAGED: "true",
        PROJECT: _label_value(project),
        WORKLOAD: _label_value(name),
        SUBMISSION: ident.submission,
    }
    annotations = {ID: ident.workload}
    optional = {
        PLAN: ident.plan_id,
        SPEC_DIGEST: ident.spec_digest,
        CANDIDATE: ident.candidate,
        POOL: ident.pool,
        REPLICAS: None if ident.replicas is None else str(ident.replicas),
        REPLICA: None if replica is None else str(replica),
        REQUEST: None if ident.request is None else json.dumps(ident.request, sort_keys=True),
    }
    annotations |= {k: v for k, v in optional.items() if v is not None}
    return {"labels": labels, "annotations": annotations}


def identity_of(metadata: Mapping[str, Any]) -> Identity | None:
    """Our identity from an object's raw ``metadata``, or None for anything not unmistakably ours."""
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    workload = annotations.get(ID, "")
    project, slash, name = workload.partition("/")
    if (
        labels.get(MANAGED) != "true"
        or not (project and slash and name)
        or "/" in name
        or labels.get(PROJECT) != _label_value(project)
        or labels.get(WORKLOAD) != _label_value(name)
        or not labels.get(SUBMISSION)
    ):
        return None
    replicas = annotations.get(REPLICAS, "")
    try:
        request = json.loads(annotations[REQUEST]) if REQUEST in annotations else None
    except ValueError:
        request = None
    return Identity(
        workload=workload,
        submission=labels[SUBMISSION],
        plan_id=annotations.get(PLAN),
        spec_digest=annotations.get(SPEC_DIGEST),
        candidate=annotations.get(CANDIDATE),
        pool=annotations.get(POOL),
        replicas=int(replicas) if replicas.isdigit() else None,
        request=request if isinstance(request, dict) else None,
    )


def replica_index(metadata: Mapping[str, Any]) -> int | None:
    value = (metadata.get("annotations") or {}).get(REPLICA, "")
    return int(value) if value.isdigit() else None


def _label_value(text: str) -> str:
    """Spec names are label-safe already (``[a-z0-9_.-]``, at most 63); kept as is."""
    return text[:63]
