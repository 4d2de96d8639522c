"""A unit of a run's work (`Unit`), the request it stands for and the reply an executor hands back.

The types an executor (`runner.executors.base`) passes to and from the run's `RunContext`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, TypedDict

__all__ = ["ModelRequest", "Output", "Unit"]


@dataclass(slots=True)
class Unit:
    """One sample to produce: call `model` with `item.prompt`, or take `output` from the cache.

    ``item`` is the rendered `suite.items.Item` (``prompt``, ``target``, ``row``, ``index``);
    ``key`` the call's request key (the output cache's name for it: items with the same prompt
    share it); ``id`` names the sample, unique within the run.
    """

    task_id: str
    item: Any
    model: Any
    key: str
    epoch: int
    output: dict | None = None

    @property
    def id(self) -> str:
        """The sample's name within the run: ``task_id/model label/item index/epoch``."""
        return f"{self.task_id}/{self.model.label}/{self.item.index}/{self.epoch}"


class Output(TypedDict, total=False):
    """A model's answer to a unit, as handed back with `RunContext.reply`."""

    output_text: str | None  # the text the extractor reads (None for a reply with none)
    usage: dict | None  # input_tokens, output_tokens, ... (prices the call)
    response_id: str | None
    latency_s: float | None
    reply: Any  # the provider's raw JSON reply, kept in the output cache (optional)
    cost_usd: float | None  # only if the executor knows better than usage x the model's price


class ModelRequest(NamedTuple):
    """What the engine would send for a unit: POST `body` (JSON) to the model's base URL + `path`."""

    model: Any  # the evalnb.Model (name, base_url, api, price, key variable)
    path: str  # "/chat/completions" or "/responses"
    body: dict[str, Any]
