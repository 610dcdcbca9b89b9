"""Every reason a plan gives, worded in one place.

A plan's actions and waiting workloads each carry a :class:`~specs.actions.Reason`: a code
from a closed set (docs/reasons.md) and a sentence. The greedy, the CP-SAT explainer, the
disruptive steps, fan-out, site policy and the reconciler find the facts by different
routes; a user must read the same sentence for the same facts whichever found them. So
the sentences are built here, from facts passed in, and nowhere else. GPU counts are
written as people write them (``8``, not ``8.0``), times as UTC ISO 8601.

One module per kind of reason, all re-exported here (callers write
``reasons.granted(...)``): words, started, disturbed, edits (solvers/drift.py), waiting.
"""

from solvers.reasons.disturbed import (
    above_limit,
    down_to_limit,
    duplicate,
    fan_out_loser,
    gave_back,
    moved,
    outranked,
    pruned,
    reclaimed,
    reclaimed_type,
    then_for,
)
from solvers.reasons.edits import (
    change_does_not_fit,
    change_not_placed,
    change_waits_for_min_runtime,
    edited_after_completion,
    fewer_replicas,
    queued_for_old_version,
    queued_in_removed_pool,
    queued_on_taken_nodes,
    replaced,
    replacing,
    saves_first,
    stays_preemptible,
    unknown_version,
)
from solvers.reasons.started import (
    fan_out_candidate,
    granted,
    resumed,
    room_made,
    started_short,
)
from solvers.reasons.waiting import (
    at_fair_share,
    beyond_deserved,
    candidates_waiting,
    cluster_unreachable,
    counted_once,
    failed,
    min_runtime_wait,
    no_eligible_pool,
    no_fan_out_candidate,
    no_room,
    non_preemptible_over_deserved,
    over_budget_cost,
    over_budget_hours,
    over_limit,
    over_type_quota,
    ranked_lower,
    retry,
    submitted,
    walltime_exceeds,
    walltime_exceeds_cluster,
)
from solvers.reasons.words import (
    gpus,
    ordinal,
    pools,
    shape,
    stamp,
)

__all__ = [
    "above_limit",
    "at_fair_share",
    "beyond_deserved",
    "candidates_waiting",
    "change_does_not_fit",
    "change_not_placed",
    "change_waits_for_min_runtime",
    "cluster_unreachable",
    "counted_once",
    "down_to_limit",
    "duplicate",
    "edited_after_completion",
    "failed",
    "fan_out_candidate",
    "fan_out_loser",
    "fewer_replicas",
    "gave_back",
    "gpus",
    "granted",
    "min_runtime_wait",
    "moved",
    "no_eligible_pool",
    "no_fan_out_candidate",
    "no_room",
    "non_preemptible_over_deserved",
    "ordinal",
    "outranked",
    "over_budget_cost",
    "over_budget_hours",
    "over_limit",
    "over_type_quota",
    "pools",
    "pruned",
    "queued_for_old_version",
    "queued_in_removed_pool",
    "queued_on_taken_nodes",
    "ranked_lower",
    "reclaimed",
    "reclaimed_type",
    "replaced",
    "replacing",
    "resumed",
    "retry",
    "room_made",
    "saves_first",
    "shape",
    "stamp",
    "started_short",
    "stays_preemptible",
    "submitted",
    "then_for",
    "unknown_version",
    "walltime_exceeds",
    "walltime_exceeds_cluster",
]
