"""`evalnb.stats` is `evalnb.results.stats` (moved there; this name keeps old imports working)."""

import sys

from evalnb.results import stats as _module

sys.modules[__name__] = _module
