"""How an apply reports: a line per action as it finishes, a verdict, or one JSON document."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from controlplane.apply import ActionOutcome, ApplyReport
from controlplane.cli.views.words import agrees, counted
from controlplane.staleness import SHOWN

if TYPE_CHECKING:  # the store (sqlalchemy) is imported only where it is opened
    from controlplane.store import ActionRow


def outcome_line(console: Console, o: ActionOutcome) -> None:
    color = {"done": "green", "failed": "red", "held": "yellow"}.get(o.status, "dim")
    console.print(
        f"  [{color}]{o.status:>6}[/] {o.action.op.value:<8} {o.action.workload}"
        + (f"  job {o.job}" if o.job else "")
        + (f"  {o.message}" if o.message else "")
    )


def typed_here(command: str, spec_dir: Path | None) -> str:
    """``command`` as typed from the current directory: with ``--dir`` when the specs are
    elsewhere (a plan file or a plan id says nothing of where they are)."""
    if spec_dir is not None and spec_dir.resolve() != Path.cwd().resolve():
        command += f" --dir {shlex.quote(str(spec_dir))}"
    return command


def verdict(console: Console, report: ApplyReport, spec_dir: Path | None = None) -> None:
    if report.already_applied:
        show = typed_here(f"cp show {report.plan_id}", spec_dir)
        told = (
            "its history has been pruned since"
            if report.pruned
            else f"`{escape(show)}` lists what it did"
        )
        console.print(
            f"Nothing to do: plan {report.plan_id} was applied already ({told}).",
            highlight=False,
        )
        return
    if report.followed_by is not None:
        show = typed_here(f"cp show {report.followed_by}", spec_dir)
        console.print(
            f"Nothing to do: the clusters follow these specs already; plan "
            f"{report.followed_by} applied them since plan {report.plan_id} was made "
            f"(`{escape(show)}` lists what it did).",
            highlight=False,
        )
        return
    done = sum(o.status == "done" for o in report.outcomes)
    if report.stopped:
        console.print(
            f"[yellow]Apply stopped on request[/]: {done} done, the rest not run; the same "
            "`cp apply` again goes on from what was done (a plan file resumes; a directory "
            "is planned again from the clusters as they are).",
            highlight=False,
            soft_wrap=True,
        )
        return
    head = "[green]Apply complete[/]" if report.ok else "[red]Apply failed[/]"
    held = sum(o.status == "held" for o in report.outcomes)
    console.print(
        f"{head}: {done} done, {len(report.failed)} failed"
        + (
            f", {held} held back by the failure (`cp apply` again runs them once it passes)"
            if held
            else ""
        )
        + (" (resumed an apply that stopped before its end)" if report.resumed else "")
        + "."
    )
    if report.unaffected:  # why a plan made against another state of the clusters was run
        shown, more = report.unaffected[:SHOWN], len(report.unaffected) - SHOWN
        console.print(
            "The clusters changed since the plan was made, in ways its actions do not "
            f"depend on: {escape('; '.join(shown))}"
            + (f"; and {more} more" if more > 0 else "")
            + ".",
            highlight=False,
            soft_wrap=True,
        )


def apply_json(
    plan_id: str,
    report: ApplyReport | None,
    *,
    declined: bool = False,
    unreachable: Mapping[str, str] | None = None,
    silent: str = "",
    waiting: int = 0,
    cut_short: Sequence[str] = (),
) -> dict[str, Any]:
    """The apply as one document; ``report`` None: the plan had nothing to do, or (with
    ``declined``) the user said no. ``unreachable``: the plan's clusters that did not
    answer (nothing was checked or done there); ``silent``: why that is a failure (no
    cluster answered at all); ``waiting``: the workloads the plan leaves waiting;
    ``cut_short``: the plan's steps that did not finish (its ``solver.cutShort``)."""
    down = dict(unreachable or {})
    cut = {"cutShort": list(cut_short)} if cut_short else {}
    if report is None:
        nothing = "no changes: the clusters match the specs"
        if down:
            nothing = "no changes on the clusters that answered"
        elif waiting:
            nothing = f"no changes now: {counted(waiting, 'workload')} {agrees(waiting, 'wait')}"
        if silent:
            nothing = silent
        return {
            "plan": plan_id,
            "resumed": False,
            "alreadyApplied": False,
            "ok": not declined and not silent,
            "stopped": False,
            "actions": [],
            "unreachable": down,
            **cut,
            "message": "apply cancelled: nothing was done" if declined else nothing,
        }
    return {
        "plan": plan_id,
        "resumed": report.resumed,
        "alreadyApplied": report.already_applied,
        **({"followedBy": report.followed_by} if report.followed_by else {}),
        # what changed since the plan was made that its actions do not depend on
        **({"changedSince": report.unaffected} if report.unaffected else {}),
        "ok": report.ok and not report.stopped,
        "stopped": report.stopped,  # on request (a signal): the rest is not run
        "unreachable": down,
        **cut,
        "actions": [
            {
                "seq": o.seq,
                "op": o.action.op.value,
                "workload": o.action.workload,
                "status": o.status,
                "job": o.job,
                "message": o.message,
            }
            for o in report.outcomes
        ],
    }


def recorded_json(rows: list[ActionRow]) -> list[dict[str, Any]]:
    """The store's record of a plan's actions, in execution order (``pending``: not run)."""
    return [
        {
            "seq": r.seq,
            "op": r.op,
            "workload": r.workload,
            "cluster": r.cluster,
            "status": r.status,
            "job": r.job,
            "message": r.message,
            "startedAt": r.started_at.isoformat() if r.started_at else None,
            "finishedAt": r.finished_at.isoformat() if r.finished_at else None,
        }
        for r in rows
    ]
