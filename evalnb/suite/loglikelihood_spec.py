"""``loglikelihood``: score a task by log-probabilities instead of generated text (an evalnb extension).

lm-eval scores most of its tasks this way: each continuation (a choice after its delimiter)
is appended to the prompt and the model's log-probability of it is read back from a
``/v1/completions`` call with ``echo`` and ``logprobs``. A manifest without the field is the
gateway's (generation) and loads unchanged.

- ``multiple_choice``: the item's continuations are ``continuations`` (a dotted path to a list
  of strings in the preprocessed row) or, when that is not given, the task's ``choices``
  each after ``delimiter``. The target is the gold choice's index as a string.
- ``loglikelihood``: one continuation per item (``continuations`` names a string or a list).
- ``loglikelihood_rolling``: the target text itself is scored (perplexity); no continuations.

``contexts`` (multiple choice only; a dotted path to a list of strings) makes an item a
multiple-input one, lm-eval's winogrande shape: each context after the prompt is scored with
the item's one continuation, and the choices are the contexts. A row whose path is missing or
null has the one context, its prompt.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic_core import InitErrorDetails

from evalnb.suite._validation import ManifestModel, NonEmptyStr, problem

__all__ = ["LoglikelihoodSpec", "LOGLIKELIHOOD_TYPES"]

LOGLIKELIHOOD_TYPES = ("multiple_choice", "loglikelihood", "loglikelihood_rolling")


class LoglikelihoodSpec(ManifestModel):
    """How an item's continuations are found; scored over ``Model(api="completions")``."""

    type: Literal["multiple_choice", "loglikelihood", "loglikelihood_rolling"] = "multiple_choice"
    continuations: NonEmptyStr | None = None  # dotted path in the row (a list of strings, or one string)
    delimiter: str = " "  # before each of the task's `choices` (lm-eval's target_delimiter)
    contexts: NonEmptyStr | None = None  # dotted path in the row to a multiple-input item's contexts

    @classmethod
    def _problems(cls, data: dict[str, Any]) -> list[InitErrorDetails]:
        if data.get("type") == "loglikelihood" and data.get("continuations") is None:
            return [problem(("continuations",), "missing", "required for type 'loglikelihood'")]
        if data.get("contexts") is not None and data.get("type", "multiple_choice") != "multiple_choice":
            return [problem(("contexts",), "invalid", "contexts are for type 'multiple_choice' only",
                            data.get("contexts"))]
        return []
