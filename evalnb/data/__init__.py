"""Datasets: the local file store, URL safety checks and ``load_rows``.

``datasets`` (Hugging Face) and ``httpx`` are imported only when a load needs them.
"""

from __future__ import annotations

from evalnb.data.upload_store import upload, path_for
from evalnb.data.loaders import load_rows
from evalnb.data.url_safety import check_public_url

__all__ = ["check_public_url", "load_rows", "path_for", "upload"]
