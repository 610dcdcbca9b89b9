"""Edits to running work (solvers/drift.py): a replacement, its old job, fewer replicas,
and a replacement that waits."""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from solvers.reasons.words import gpus, stamp
from specs.actions import Reason, ReasonCode
from specs.durations import format_duration
from specs.snapshot import Refusal


class Cause(NamedTuple):
    """Why a running job is replaced by a new one: its workload's spec changed (``fields``,
    the new version runs), or a node it runs on leaves or shrinks (``nodes``: the same
    version runs elsewhere), or both."""

    fields: str = ""  # "gpus: 4 -> 8; image: ..."
    nodes: str = ""  # "its node a100-02 leaves the cluster"

    @property
    def lead(self) -> str:
        if not self.fields:  # the workload's spec is as it was: its Cluster's changed
            return self.nodes
        return f"the spec changed ({'; '.join(p for p in (self.fields, self.nodes) if p)})"

    @property
    def new(self) -> str:
        return "the new version" if self.fields else "its new job"

    @property
    def runs_on(self) -> str:
        return "running the old version" if self.fields else "running where it is"


def replacing(cause: Cause, old_job: str) -> Reason:
    """The submit that replaces a running job (an edited workload's new version, or the
    same elsewhere)."""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"{cause.lead}: {cause.new} replaces job {old_job}",
    )


def saves_first(old_job: str, cause: Cause | None = None, *, saves: bool = True) -> Reason:
    """A replaced job that saves its checkpoint first: cancelled by this plan (``change``:
    why), or winding down already (``saves``: with a checkpoint to save). The new version
    starts once it has ended."""
    lead = f"{cause.lead}: " if cause is not None else ""
    new = cause.new if cause is not None else "the new version"
    ends = (
        "saves its checkpoint first (it winds down in its grace)" if saves else "winds down first"
    )
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"{lead}job {old_job} {ends}; {new} starts once it has ended",
    )


def succeeds(reason: Reason, old_job: str) -> Reason:
    """The start of an edited workload's new version, a plan after the one that cancelled
    its old job (to save its checkpoint first, say): why it starts, and which job it
    follows (what ``cp history`` ties the two by)."""
    return Reason(
        code=reason.code,
        message=f"{reason.message}; the new version of the edited spec: job {old_job}, of "
        "the version before, was cancelled",
    )


def replaced(cause: Cause) -> Reason:
    """The cancel of the job a new one replaces."""
    follow = "cannot follow" if cause.fields else "moves off it"
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"{cause.lead}: its running job {follow} and is replaced",
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


def candidate_outrun(job: str, nodes: list[str], others: list[str]) -> Reason:
    """The cancel of a waiting fan-out candidate the cluster would start on GPUs the plan
    frees for ``others``: its evictions run first, and the cluster starts what waits the
    moment it fits."""
    return Reason(
        code=ReasonCode.FAN_OUT,
        message=(
            f"job {job} waits in the cluster's queue, and would start on {', '.join(nodes)} "
            f"as soon as this plan frees GPUs there, before {', '.join(others)} arrive"
            f"{'s' if len(others) == 1 else ''} on them: it is cancelled, and the workload's "
            "candidates submitted again after the plan's other work"
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


def fan_out_edited(job: str, cause: Cause) -> Reason:
    """A running fan-out workload edited in a way its job cannot follow, or on a node that
    leaves or shrinks: fan-out work is not replaced (its candidates are chosen once); the
    new version runs once it ends, and it runs on where it is meanwhile."""
    then = (
        f"job {job} runs the old version, and the new one is submitted once it has ended"
        if cause.fields
        else f"job {job} runs on there until it ends"
    )
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=f"{cause.lead}; a fan-out workload is not replaced while it runs: {then}",
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


def replacement_refused(
    job: str, refusal: Refusal, until: datetime, *, queued: bool = False
) -> Reason:
    """An edit that needs a new job, while the cluster refused to act on the running one
    (``queued``: on the one waiting in its queue): the old version runs on (waits on, and
    may start as it is), and the cancel is tried again once its backoff is over."""
    times = "once" if refusal.count == 1 else f"{refusal.count} times in a row"
    stays = "waits in the cluster's queue as it is (it may start as the version before)"
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"the edit needs a new job, but the {refusal.op} of job {job} failed {times} "
            f"({refusal.message or 'no message'}): it {stays if queued else 'runs on as it is'}"
            f", and the new version waits; tried again after {stamp(until)}"
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


def change_waits_for_min_runtime(cause: Cause, min_runtime: int, until: datetime) -> Reason:
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"{cause.lead}; replacing the job needs a restart, so it keeps "
            f"{cause.runs_on} while its project's minRuntime "
            f"({format_duration(min_runtime)}) protects it, until {stamp(until)}"
        ),
    )


def change_over_budget(cause: Cause, why: Reason) -> Reason:
    """A replacement its project's spent budget holds back (``why``): the new version is
    new work; what runs goes on."""
    return Reason(
        code=why.code,
        message=f"{cause.lead}; {cause.new} is new work: {why.message}; the job keeps "
        f"{cause.runs_on} meanwhile",
    )


def change_does_not_fit(cause: Cause, why: str) -> Reason:
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"{cause.lead}; {cause.new} {why}, so the job keeps {cause.runs_on} until it fits"
        ),
    )


def change_not_placed(cause: Cause, why: Reason | None) -> Reason:
    """A replacement that the cycle could not place as a new job, with its old job's GPUs
    free; ``why``: what that new job waited for, when known."""
    told = f" ({why.code.value}: {why.message})" if why is not None else ""
    return Reason(
        code=ReasonCode.SPEC_CHANGED,
        message=(
            f"{cause.lead}; {cause.new}, waiting as a new job of its project and priority "
            f"with the old job's GPUs free, was not placed{told}, so the job keeps "
            f"{cause.runs_on} until it fits"
        ),
    )
