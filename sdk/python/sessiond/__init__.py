"""sessiond: the Python client and worker of sessiond (standard library only)."""

from .client import Client, SessiondError, new_id
from .worker import Job, Worker

__all__ = ["Client", "SessiondError", "Job", "Worker", "new_id"]
