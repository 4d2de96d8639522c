"""Scoring a model's output: ``extraction.py`` (output_extraction: text -> the answer) and
``grading.py`` (grader contracts -> scores, run in the sandbox)."""

from __future__ import annotations

__all__: list[str] = []
