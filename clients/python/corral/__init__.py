"""Corral's Python client: submit GPU jobs, wait for them, read their output.

    import corral
    client = corral.Client()            # $CORRAL_SERVER, $CORRAL_TOKEN, the CLI's config
    job = client.submit("python train.py", gpus=1)
    job = client.wait(job)
    print(job.state, client.logs(job, tail=20))

Standard library only; the models (corral.models) are generated from the
server's /openapi.json.
"""
from .client import TERMINAL_STATES, Client, ServerEvent
from .errors import (BadRequest, Conflict, CorralError, Forbidden, InvalidField, NotFound, RateLimited,
                     Unauthorized, Unreachable, WaitTimeout)
from .models import Array, ClusterStatus, Job, QueuedJob, QueueResponse

__all__ = [
    "Client", "ServerEvent", "TERMINAL_STATES",
    "CorralError", "BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict", "InvalidField",
    "RateLimited", "Unreachable", "WaitTimeout",
    "Job", "Array", "QueuedJob", "QueueResponse", "ClusterStatus",
]

__version__ = "0.1.0"
