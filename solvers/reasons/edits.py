"""Edits to running work (solvers/drift.py): a replacement, its old job, fewer replicas,
and a replacement that waits."""

from __future__ import annotations

from datetime import datetime

from solvers.reasons.words import gpus, stamp
from specs.actions import Reason, ReasonCode
from specs.durations import format_duration


def replacing(changes: str, old_job: str) -> Reason:
    """The submit of an edited workload's new version."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"the spec changed ({changes}): the new version replaces job {old_job}",
    )


def saves_first(old_job: str, changes: str | None = None, *, saves: bool = True) -> Reason:
    """An edited workload whose old job saves its checkpoint first: cancelled by this plan
    (``changes``: the fields), or winding down already (``saves``: with a checkpoint to
    save). The new version starts once it has ended."""
    lead = f"the spec changed ({changes}): " if changes is not None else ""
    ends = (
        "saves its checkpoint first (it winds down in its grace)" if saves else "winds down first"
    )
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"{lead}job {old_job} {ends}; the new version starts once it has ended",
    )


def replaced(changes: str) -> Reason:
    """The cancel of the job an edited workload's new version replaces."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"the spec changed ({changes}): its running job cannot follow and is replaced",
    )


def edited_after_completion(changes: str) -> Reason:
    """A workload whose spec changed after its job ran to completion: it does not run again."""
    what = f" ({changes})" if changes else ""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed{what} after its job completed: a completed workload does not "
            "run again; give it a new metadata.name to run the new version"
        ),
    )


def stays_preemptible(changes: str, kind: str, queue: str, would: float, deserved: float) -> Reason:
    """A running job edited to non-preemptible that its queue's deserved quota cannot
    hold as such."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed ({changes}); non-preemptible work must fit within deserved "
            f"quota, and {kind} {queue}'s would hold {gpus(would)} GPUs of its deserved "
            f"{gpus(deserved)}, so the job stays preemptible until it fits"
        ),
    )


def queued_on_taken_nodes(job: str, nodes: list[str], gone: list[str] | None = None) -> Reason:
    """The cancel of a job that waits in a cluster's queue for nodes others hold now, or
    bound to nodes the cluster no longer has (``gone``: a node deleted under it)."""
    where = ", ".join(nodes)
    if gone:
        return Reason(
            code=ReasonCode.NO_CAPACITY,
            message=(
                f"job {job} is bound to {', '.join(gone)}, which the cluster no longer has: "
                "it is cancelled, and the workload planned again where it fits"
            ),
        )
    return Reason(
        code=ReasonCode.NO_CAPACITY,
        message=(
            f"job {job} waited in the cluster's queue for {where}, which cannot hold it "
            "now (other work holds the GPUs, or the node is drained or gone): it is cancelled, and "
            "the workload planned again where it fits"
        ),
    )


def queued_in_removed_pool(job: str, pool: str) -> Reason:
    """The cancel of a job that waits in a cluster's queue in a pool the specs removed."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"job {job} waited in the cluster's queue in pool {pool}, which the specs no "
            "longer have: it is cancelled, and the workload waits for its other candidates "
            "or is planned again in the pools it has"
        ),
    )


def queued_for_old_version(job: str) -> Reason:
    """The cancel of a job that waits in a cluster's queue for an edited spec."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed while job {job} waited in the cluster's queue: it is "
            "cancelled, and the new version is planned in its place"
        ),
    )


def fan_out_edited(job: str, changes: str) -> Reason:
    """A running fan-out workload edited in a way its job cannot follow: fan-out work is
    not replaced (its candidates are chosen once); the new version runs once it ends."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed ({changes}); a fan-out workload is not replaced while it "
            f"runs: job {job} runs the old version, and the new one is submitted once it "
            "has ended"
        ),
    )


def unknown_version(job: str) -> Reason:
    """A running job whose spec digest is not the spec's, of a version the store never
    recorded: what changed cannot be told, nor whether this store made it."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"job {job} runs a version of this spec that the store does not hold (another "
            "store made it, or this one lost its history): what changed cannot be told, so "
            "it is left running; cancel it on the cluster to run the spec as it is now"
        ),
    )


def fewer_replicas(running: int, wanted: int) -> Reason:
    """An elastic job running more replicas than its edited spec asks for (what the spec
    said before is not told: the job may have grown or shrunk since it was submitted)."""
    stop = running - wanted
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed (replicas: now {wanted}): {stop} of the {running} running "
            f"replicas stop{'s' if stop == 1 else ''}"
        ),
    )


def change_waits_for_min_runtime(changes: str, min_runtime: int, until: datetime) -> Reason:
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed ({changes}); replacing the job needs a restart, so it keeps "
            f"running the old version while its project's minRuntime "
            f"({format_duration(min_runtime)}) protects it, until {stamp(until)}"
        ),
    )


def change_does_not_fit(changes: str, why: str) -> Reason:
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed ({changes}); the new version {why}, so the job keeps running "
            "the old version until it fits"
        ),
    )


def change_not_placed(changes: str, why: Reason | None) -> Reason:
    """A replacement that the cycle could not place as a new job, with its old job's GPUs
    free; ``why``: what that new job waited for, when known."""
    told = f" ({why.code.value}: {why.message})" if why is not None else ""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the spec changed ({changes}); the new version, waiting as a new job of its "
            f"project and priority with the old job's GPUs free, was not placed{told}, so "
            "the job keeps running the old version until it fits"
        ),
    )
