"""`evalnb.comparison` is `evalnb.results.comparison` (moved there; this name keeps old imports working)."""

import sys

from evalnb.results import comparison as _module

sys.modules[__name__] = _module
