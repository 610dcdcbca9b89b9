"""Whether a checkout of the spec repo is behind the specs the clusters follow.

Several reconcilers may share one store, each reading its own clone of the spec repo (a
CI job, a ``cp watch``, a second watch for availability). A clone that has not pulled
yet holds older specs; planned against the clusters a newer commit's apply changed, its
plan undoes that apply (cancels the new workloads, starts the removed ones, takes back
a raised quota), and the newer clone's next apply undoes that again: two watches at two
commits kill jobs every cycle. So an apply that would make the clusters follow specs
other than the last applied ones first asks whether its checkout is behind them:

1. git knows both commits: behind when ours is in the history of theirs; not behind when
   theirs is in ours (a revert is a new commit, after the one it reverts).
2. git cannot tell (theirs not fetched here, a shallow clone, a pull request's merge
   commit that no branch has, or the two diverged): behind when these very specs were
   applied before and other specs since, and our commit is older than the plan that
   applied those. A revert committed afterwards is not.

Without a commit on either side (specs outside git) nothing can be told, and nothing is
held back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from controlplane.gitcommit import branches_with, committed_at, contains
from controlplane.plan import Plan


class Applied(Protocol):
    """The store, as far as this asks it (controlplane.store.History)."""

    def applied_specs(self, spec_digest: str) -> bool: ...


PULL = (
    "pull it (a reconciler must read the newest specs); to go back to these specs on "
    "purpose, commit a revert"
)


def behind(
    spec_dir: Path, spec_digest: str, commit: str | None, last: Plan | None, store: Applied
) -> str | None:
    """Why the checkout at ``commit`` (its specs' digest ``spec_digest``) is behind the
    specs of ``last``, the plan the clusters follow (None: it is not, or that cannot be
    told)."""
    if last is None or last.spec_digest == spec_digest:
        return None
    ours, theirs = commit_of(commit), commit_of(last.git_commit)
    if ours is None or theirs is None or ours == theirs:
        return None
    following = f"the clusters follow the specs of git {theirs[:12]} (plan {last.id})"
    if contains(spec_dir, theirs, ours):
        ahead = f"this checkout ({ours[:12]}) is behind: {following}, which comes after it"
        branches = branches_with(spec_dir, theirs)
        if branches is not None and not branches[0]:  # a plan file of a branch since deleted
            where = (
                f"only remote-tracking branches have it: {', '.join(branches[1])} (pull it if "
                "that branch is still upstream; `git fetch --prune` drops the ones deleted "
                "there)"
                if branches[1]
                else "is on no branch here (a plan file applied from a branch since deleted "
                "or not pushed?)"
            )
            return (
                f"{ahead} and {where}; to keep what it changed, `git merge {theirs[:12]}`; to "
                "go back to these specs, commit here (`git commit --allow-empty` will do) and "
                "apply again"
            )
        return f"{ahead}; {PULL}"
    if contains(spec_dir, ours, theirs) or not store.applied_specs(spec_digest):
        return None
    made = committed_at(spec_dir, ours)
    if made is None or made >= last.created_at:
        return None
    return (
        f"this checkout ({ours[:12]}) looks behind: {following}, a commit it does not have, "
        "and its own specs were applied before those; " + PULL
    )


def commit_of(stamp: str | None) -> str | None:
    """A plan's commit without the ``-dirty`` mark of local edits."""
    return stamp.removesuffix("-dirty") if stamp else None
