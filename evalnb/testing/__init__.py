"""Test your suites against a real local model server (no network, no mocks).

>>> from evalnb.testing import LocalModelServer, Fault
>>> with LocalModelServer({"2 + 2": "4"}, faults=[Fault(status=429, retry_after=0.1, times=1)]) as s:
...     model_url = s.base_url
"""

from __future__ import annotations

from evalnb.testing._batches import BatchFault
from evalnb.testing._faults import Fault
from evalnb.testing._server import LocalModelServer, RecordedRequest

__all__ = ["BatchFault", "Fault", "LocalModelServer", "RecordedRequest"]
