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
