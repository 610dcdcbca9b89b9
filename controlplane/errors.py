"""The project's own error tree; the CLI catches these and nothing else.

    ControlPlaneError
    ├── StalePlanError       the clusters moved on since the plan was made: plan again
    ├── PlanNotFoundError    no plan file or stored plan by that name
    │   └── AmbiguousPlanError  a prefix that several stored plans' ids begin with
    ├── WorkloadNotFoundError no workload by that name in the specs
    ├── ApplyError           some actions failed; what ran is recorded, a rerun resumes
    ├── LeaseHeldError       another reconciler is applying right now
    ├── CheckoutBehindError  the specs are older than those the clusters follow: pull
    ├── StoreError           the store's database cannot be used as it is (one line: which
    │                        database, what went wrong, what to do)
    └── StateFileError       a state or input file (simulator state, plan, snapshot) is
                             unreadable or not what it should be
(spec problems are specs.diagnostics.SpecError; adapter failures adapters.base.AdapterError)
"""

from __future__ import annotations


class ControlPlaneError(Exception):
    pass


class StalePlanError(ControlPlaneError):
    pass


class PlanNotFoundError(ControlPlaneError):
    pass


class AmbiguousPlanError(PlanNotFoundError):
    """``ref`` names no one plan: it begins the ids of each of ``ids`` (sorted)."""

    SHOWN = 10  # ids listed in the message; a one-character prefix may match hundreds

    def __init__(self, ref: str, ids: list[str]) -> None:
        self.ref, self.ids = ref, ids
        listed = ", ".join(ids[: self.SHOWN])
        more = f", and {len(ids) - self.SHOWN:,} more" if len(ids) > self.SHOWN else ""
        super().__init__(
            f"{ref!r} is ambiguous: the ids of {len(ids):,} stored plans begin with it "
            f"({listed}{more}); give more of the id"
        )


class WorkloadNotFoundError(ControlPlaneError):
    pass


class ApplyError(ControlPlaneError):
    pass


class LeaseHeldError(ControlPlaneError):
    pass


class CheckoutBehindError(ControlPlaneError):
    pass


class StoreError(ControlPlaneError):
    pass


class StateFileError(ControlPlaneError):
    pass
