"""Reproduces torchrun's agent's shape (torch/distributed/elastic/agent/server/api.py:753) when a SIGTERM
lands inside its log call: logging prints a chained traceback, Call stack:, Message: -- and goes on."""
import logging
import os
import signal
import sys

from torch.distributed.elastic.multiprocessing.api import SignalException, _terminate_process_handler

signal.signal(signal.SIGTERM, _terminate_process_handler)
class S:
    def write(self, s):
        os.kill(os.getpid(), signal.SIGTERM); sys.stderr.write(s)
    def flush(self): pass
logging.basicConfig(stream=S())
log = logging.getLogger("agent")
def _close():
    try:
        raise SignalException("Process 1 got signal: 15", sigval=signal.SIGTERM)
    except SignalException as e:
        signal.signal(signal.SIGTERM, _terminate_process_handler)
        log.warning("Received %s death signal, shutting down workers", e.sigval)
_close()
print("after", flush=True)
