"""The Slurm adapter: observe a real Slurm cluster, execute plan actions with sbatch/scancel/scontrol.

Modules, one concept each: :mod:`~adapters.slurm.transport` (run commands here or over
ssh), :mod:`~adapters.slurm.parse` and :mod:`~adapters.slurm.hostlist` (read Slurm's
output), :mod:`~adapters.slurm.tags` (how our jobs are recognised),
:mod:`~adapters.slurm.script` (job script and sbatch options),
:mod:`~adapters.slurm.observation` (rows to snapshot objects),
:mod:`~adapters.slurm.forecast` (``sbatch --test-only``), :mod:`~adapters.slurm.adapter`
(:class:`SlurmAdapter`), and :mod:`~adapters.slurm.localcluster` (the local test cluster).
"""

from adapters.slurm.adapter import SlurmAdapter
from adapters.slurm.forecast import StartForecast
from adapters.slurm.tags import Tag, format_tag, parse_tag
from adapters.slurm.transport import Completed, LocalTransport, SSHTransport, Transport

__all__ = [
    "Completed",
    "LocalTransport",
    "SSHTransport",
    "SlurmAdapter",
    "StartForecast",
    "Tag",
    "Transport",
    "format_tag",
    "parse_tag",
]
