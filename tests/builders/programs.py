"""Small programs the tests run as workloads (argv for ``python3 -c``)."""

# a training loop that saves and exits on its checkpoint signal (SIGUSR1)
SAVES = """import signal, sys, time
path = sys.argv[1]
open(path, "a").write("start\\n")
def save(*_):
    open(path, "a").write("saved\\n")
    sys.exit(0)
signal.signal(signal.SIGUSR1, save)
time.sleep(300)
"""

# Saves on its checkpoint signal and asks Slurm to requeue its own job, as PyTorch
# Lightning's SLURM environment does; writes what the requeue answered.
REQUEUES_ITSELF = """import os, signal, subprocess, sys, time
path = sys.argv[1]
open(path, "a").write("start\\n")
def save(*_):
    job = os.environ["SLURM_JOB_ID"]
    done = subprocess.run(["scontrol", "requeue", job], capture_output=True, text=True)
    open(path, "a").write(f"saved requeue={done.returncode}\\n")
signal.signal(signal.SIGUSR1, save)
while True:
    time.sleep(1)
"""
