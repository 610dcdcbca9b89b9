"""Which Slurm failures are worth a retry and which are not.

Slurm's client tools exit 1 for everything, so the only signal is the message. A
controller that is down, slow or restarting is temporary (the next reconcile will
succeed); a rejected request (no such partition, a node configuration that can never
exist, a bad option) is permanent and the plan must change. Unknown messages are
treated as permanent so a broken plan is not retried forever; the message is always
Slurm's own, so a person can act on it.
"""

from __future__ import annotations

import re
import shlex

from adapters.base import AdapterError, PermanentError, TemporaryError
from adapters.slurm.transport import Completed

_TEMPORARY_MESSAGES = (
    r"Unable to contact slurm controller",
    r"Socket timed out",
    r"timed out",
    r"Connection refused",
    r"Connection reset",
    r"Zero Bytes were transmitted",
    r"Communication connection failure",
    r"Transport endpoint is not connected",
    r"temporarily unavailable",
    r"temporarily unable",
    r"try again",
    r"slurmctld is busy",
    r"Slurm backup controller in standby mode",
    r"Munge encode failed",  # munged down or restarting on this host
    r"Munge decode failed",
    r"Job submit/allocate failed: Resource temporarily unavailable",
)
_TEMPORARY = re.compile("|".join(_TEMPORARY_MESSAGES), re.IGNORECASE)

# A job id Slurm no longer knows, or one that has already ended: for cancel/preempt
# "the job is gone" is the outcome we wanted.
_GONE = re.compile(
    r"Invalid job id specified|already completing or completed|Job has already finished",
    re.IGNORECASE,
)


def message(done: Completed) -> str:
    """Slurm's words without its ``sbatch: error:`` prefixes, one line."""
    text = (done.stderr or done.stdout).strip()
    lines = [re.sub(r"^\w+: (error|fatal): ", "", line).strip() for line in text.splitlines()]
    return "; ".join(line for line in lines if line) or f"exit status {done.returncode}"


def is_gone(done: Completed) -> bool:
    return bool(_GONE.search(done.stderr + done.stdout))


def classify(done: Completed) -> AdapterError:
    """The error to raise for a Slurm command that ran and failed."""
    text = message(done)
    # "sbatch", or "scontrol requeue": enough to tell which step of an action failed
    where = (
        shlex.join(done.argv[:2] if done.argv[:1] == ("scontrol",) else done.argv[:1]) or "slurm"
    )
    if _TEMPORARY.search(done.stderr + done.stdout):
        return TemporaryError(f"{where}: {text}", delay=10.0)
    return PermanentError(f"{where}: {text}")
