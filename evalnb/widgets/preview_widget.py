"""`preview`: page through a task's items and see exactly what each model will be asked.

For one item at a time the widget shows the dataset row, the rendered prompt (few-shot
examples boxed apart from the evaluated prompt, each ``{{field}}`` highlighted), the exact
request body the providers will send, the target, and what extraction and the task's grader
make of an output: one typed into "Try an output" or one stored from a run. Items come from
``suite.items`` (the same function the runner uses), so what you preview is what gets sent.

Everything the widget shows is also plain Python state (``.index``, ``.prompt_html.value``,
``try_output()``...), so it is testable without a browser, and ``static_html()`` gives the
same content to exported notebooks that have no kernel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalnb.scoring.extraction import make_extractor
from evalnb.providers import Model, build_chat_request, build_responses_request, unsent_fields
from evalnb.widgets import markup as h

if TYPE_CHECKING:
    from evalnb.suite import Suite, Task
    from evalnb.suite.items import Item

__all__ = ["PreviewWidget", "preview", "request_payload", "stored_outputs"]

# No model given: the request is shown with this in place of the model's name, and with no
# provider (no base URL, no price): what a run's defaults send to whichever model it is given.
MODEL_SLOT = "<model>"
_SCORE_HINT = "Press Score to run the grader on this output."

Outputs = dict[str, dict[int, list[tuple[str | None, str | None]]]]


def preview(
    suite: "Suite",
    task_id: str | None = None,
    outputs: Any = None,
    *,
    limit: int | None = None,
    model: Model | str | None = None,
    generation: Any = None,
    models: list[Model | str] | None = None,
    epochs: int = 1,
) -> "PreviewWidget":
    """A widget paging through ``task_id``'s items (default: the first task).

    ``outputs``: stored outputs to grade, ``{sample_index: output_text}`` (for the initial
    task) or a DataFrame with ``sample_index``, ``output_text`` and optional ``model`` and
    ``task_id`` columns. ``limit`` caps the items read per task (for huge datasets).
    ``model``/``generation`` shape the request payload shown (default: each of ``models``;
    with none, the body a run's defaults send to any model: the Responses API, ``"<model>"``
    in the model's place, no provider and no price). The Estimate tab counts what running the task would send
    (`evalnb.estimate`) for ``models`` (default: ``model``; give them with ``price=`` for a
    cost bound) and ``epochs``.
    """
    return PreviewWidget(suite, task_id, outputs, limit=limit, model=model, generation=generation, models=models,
                         epochs=epochs)


def request_payload(model: Model, prompt: str, generation: dict[str, Any] | None) -> dict[str, Any]:
    """The exact JSON body ``model`` would be sent for ``prompt`` (built by the providers)."""
    if model.api == "completions":
        from evalnb.providers.build import build_completions_request

        return build_completions_request(model.name, prompt, generation, is_openai=model.is_openai)
    build = build_chat_request if model.api == "chat" else build_responses_request
    return build(model.name, prompt, generation, is_openai=model.is_openai)


def stored_outputs(outputs: Any, default_task: str) -> Outputs:
    """Normalise ``outputs`` to ``{task_id: {sample_index: [(model or None, text), ...]}}``."""
    found: Outputs = {}
    if outputs is None:
        return found
    if hasattr(outputs, "columns") and hasattr(outputs, "to_dict"):
        missing = [c for c in ("sample_index", "output_text") if c not in outputs.columns]
        if missing:
            have = ", ".join(map(str, outputs.columns)) or "none"
            raise ValueError(f"outputs is missing column(s) {', '.join(missing)}; it has: {have}")
        for record in outputs.to_dict("records"):
            task = record.get("task_id", default_task)
            label = _text_or_none(record.get("model"))
            index = _sample_index(record["sample_index"])
            entry = found.setdefault(str(task), {}).setdefault(index, [])
            entry.append((label, _text_or_none(record["output_text"])))
        return found
    if isinstance(outputs, dict):
        per_task = found.setdefault(default_task, {})
        for key, text in outputs.items():
            if text is not None and not isinstance(text, str):
                raise TypeError(f"outputs[{key!r}] must be a string, got {type(text).__name__}")
            per_task[_sample_index(key)] = [(None, text)]
        return found
    raise TypeError(
        "outputs must be a dict {sample_index: output_text} or a DataFrame with "
        f"sample_index and output_text columns, got {type(outputs).__name__}"
    )


def _sample_index(value: Any) -> int:
    if isinstance(value, float) and value.is_integer():  # a frame column with gaps is float
        return int(value)
    index = _as_index(value)
    if index is None:
        raise TypeError(f"a sample_index must be an integer, got {value!r}")
    return index


def _text_or_none(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and value != value):  # None or NaN
        return None
    return str(value)


class PreviewWidget:
    """The preview: navigation controls over one task's items and the views of the current one.

    The displayable ipywidgets tree is ``.widget``; the instance itself displays as that tree
    plus a static HTML fallback for kernel-less exports.
    """

    def __init__(
        self,
        suite: "Suite",
        task_id: str | None = None,
        outputs: Any = None,
        *,
        limit: int | None = None,
        model: Model | str | None = None,
        generation: Any = None,
        models: list[Model | str] | None = None,
        epochs: int = 1,
    ) -> None:
        from evalnb.suite.generation import Generation

        if not hasattr(suite, "tasks") or not hasattr(suite, "items"):
            raise TypeError(f"preview needs a Suite, got {type(suite).__name__}")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise ValueError(f"limit must be a positive integer or None, got {limit!r}")
        task_id = suite.tasks[0].id if task_id is None else task_id
        suite.task(task_id)  # KeyError listing the task ids if it is not there
        self.suite, self.limit = suite, limit
        given = [_as_model(m) for m in models] if models else []
        # the request tab shows what each model of the run would be sent; `model` wins when given
        self.model: Model | None = _as_model(model) if model is not None else (given[0] if given else None)
        self.request_models = [self.model] if model is not None or not given else given
        if self.model is None:
            self.request_models = []  # no model: the run's defaults, no provider invented
        self.estimate_models = given or self.request_models
        self.epochs = epochs
        self.generation = Generation.from_value(generation).canonical()
        self.outputs = stored_outputs(outputs, task_id)
        self.task_id = task_id
        self.index = 0
        self.last_result: dict[str, Any] | None = None
        self._items: dict[str, list[Item]] = {}
        self._load_errors: dict[str, str] = {}
        self._graders: dict[str, Any] = {}
        self._stored_results: dict[tuple[str, int], list[dict[str, Any]]] = {}
        self._syncing = False
        self._estimated: str | None = None
        self._face: h.FaceHandle | None = None
        self._build()
        self.select_task(task_id)

    # -- state ------------------------------------------------------------------------------

    @property
    def task(self) -> "Task":
        return self.suite.task(self.task_id)

    @property
    def items(self) -> list["Item"]:
        """The current task's items, built on first use and cached per task."""
        if self.task_id not in self._items and self.task_id not in self._load_errors:
            try:
                self._items[self.task_id] = self.suite.items(self.task_id, limit=self.limit)
            except Exception as exc:  # a dataset, template or preprocessor problem: show it
                self._load_errors[self.task_id] = f"{type(exc).__name__}: {exc}"
        return self._items.get(self.task_id, [])

    @property
    def _label(self) -> str:
        """The model name graders see for a tried output (``"<model>"`` when none was given)."""
        return self.model.label if self.model is not None else MODEL_SLOT

    @property
    def item(self) -> "Item | None":
        items = self.items
        return items[self.index] if items else None

    @property
    def estimate(self) -> Any:
        """`evalnb.estimate` of the current task (its items as loaded here) for the preview's models."""
        from evalnb.runner.preflight import estimate

        models = self.estimate_models or [_slot_model()]
        found = estimate(self.suite, models, generation=self.generation, task_ids=[self.task_id],
                         epochs=self.epochs, items={self.task_id: self.items})
        if not self.estimate_models:  # counted for any model: say so, and no "no price for <model>"
            found.table["model"] = h.ANY_MODEL
            found.notes[:] = [n for n in found.notes if not n.startswith("no price for")]
            found.notes.append("no model given: pass models=[evalnb.Model(..., price=...)] to see each model's "
                               "request and cost bound")
        return found

    @property
    def request(self) -> dict[str, Any] | None:
        """The request body for the current item (None when the task has no items)."""
        item = self.item
        if item is None:
            return None
        if self.model is None:
            return build_responses_request(MODEL_SLOT, item.prompt, self.task_generation, is_openai=False)
        return request_payload(self.model, item.prompt, self.task_generation)

    @property
    def task_generation(self) -> dict[str, Any]:
        """The settings the current task's calls are sent with: its own, the run's, its defaults."""
        from evalnb.suite.task_generation import merged_generation

        return merged_generation(self.generation, self.task.generation)

    @property
    def generation_sources(self) -> dict[str, str]:
        """Each sent generation field -> ``task``, ``run`` or ``default`` (where its value came from)."""
        from evalnb.suite.task_generation import generation_sources

        return generation_sources(self.generation, self.task.generation)

    # -- navigation ---------------------------------------------------------------------------

    def show(self, index: int) -> None:
        """Show item ``index`` (IndexError naming the valid range if there is none)."""
        count = len(self.items)
        position = _as_index(index)
        if position is None or not 0 <= position < count:
            valid = f"0-{count - 1}" if count else "none: it has no items"
            raise IndexError(f"task {self.task_id!r} has no item {index!r} (valid: {valid})")
        self.index = position
        self._sync_controls()
        self._render()

    def next(self) -> None:
        if self.index + 1 < len(self.items):
            self.show(self.index + 1)

    def prev(self) -> None:
        if self.index > 0:
            self.show(self.index - 1)

    def select_task(self, task_id: str) -> None:
        """Switch to another task of the suite and show its first item."""
        self.suite.task(task_id)
        self.task_id, self.index = task_id, 0
        self._syncing = True
        try:
            self.task_select.value = task_id
        finally:
            self._syncing = False
        self._sync_controls()
        self._render()

    # -- trying outputs -----------------------------------------------------------------------

    def try_output(self, text: str) -> dict[str, Any]:
        """Extract and grade ``text`` as if the model had answered the current item."""
        if not isinstance(text, str):
            raise TypeError(f"try_output needs a string, got {type(text).__name__}")
        self._syncing = True
        try:
            self.output_box.value = text
        finally:
            self._syncing = False
        item = self.item
        if item is None:
            result = {"extracted_output": None, "scores": {}, "error": self._no_items_message()}
        else:
            result = self._grade(item, [(self._label, text)])[0]
        self.last_result = result
        self.result_html.value = h.result_view(result, "result for your output")
        return result

    # -- display ------------------------------------------------------------------------------

    def static_html(self) -> str:
        """The current item as self-contained HTML (for exports without a kernel)."""
        return h.page(
            self.title_html.value,
            h.heading("Prompt"), self.prompt_html.value,
            h.heading("Target"), self.target_html.value,
            h.heading("Request payload"), self.request_html.value,
            h.heading("Dataset row"), self.row_html.value,
            h.heading("Estimate"), self.estimate_html.value,
            self.outputs_html.value,
            self.result_html.value if self.last_result is not None else "",
        )  # fmt: skip

    def _repr_html_(self) -> str:
        return self.static_html()

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return h.display_bundle(self.widget, self.static_html(), repr(self), **kwargs)

    def _ipython_display_(self) -> None:
        """The live widget, and its static face as a separate output (following the widget's controls)."""
        self._face = h.show_widget(self.widget, self.static_html(), repr(self))

    def _update_face(self) -> None:
        """After a change made in the widget: the static face (saved with the notebook) follows.

        Not after Python calls (``show``, ``try_output``): those run in later cells, and a face
        rewritten from a later cell would differ from what re-executing the cell shows (nbval).
        """
        if self._face is not None:
            self._face.update(self.static_html())

    def __repr__(self) -> str:
        return f"PreviewWidget(task={self.task_id!r}, index={self.index}, items={len(self.items)})"

    # -- building and rendering -----------------------------------------------------------------

    def _build(self) -> None:
        import ipywidgets as w

        from evalnb.widgets.shared import layout, make

        tasks = [(t.id if not t.name else f"{t.id} \u2014 {t.name}", t.id) for t in self.suite.tasks]
        self.task_select = make(w.Dropdown, options=tasks, value=self.task_id, description="task")
        self.prev_button = make(w.Button, description="Previous", icon="arrow-left")
        self.next_button = make(w.Button, description="Next", icon="arrow-right")
        self.slider = make(w.IntSlider, min=0, max=0, value=0, description="item", continuous_update=False)
        self.jump = make(w.BoundedIntText, min=0, max=0, value=0, description="jump to",
                         layout=layout(width="160px"))  # fmt: skip
        self.title_html, self.prompt_html, self.row_html = make(w.HTML), make(w.HTML), make(w.HTML)
        self.request_html, self.target_html, self.outputs_html = make(w.HTML), make(w.HTML), make(w.HTML)
        self.result_html, self.estimate_html = make(w.HTML), make(w.HTML)
        self.output_box = make(w.Textarea, placeholder="Type a model output, e.g. 'Answer: B'",
                               description="Try an output", style={"description_width": "initial"},
                               layout=layout(width="100%"))  # fmt: skip
        self.score_button = make(w.Button, description="Score", button_style="primary")
        tabs = make(w.Tab, children=[self.prompt_html, self.request_html, self.row_html, self.estimate_html],
                    titles=["Prompt", "Request payload", "Dataset row", "Estimate"])  # fmt: skip
        nav = make(w.HBox, [self.task_select, self.prev_button, self.slider, self.next_button, self.jump])
        trial = make(w.VBox, [self.output_box, self.score_button, self.result_html])
        self.widget = make(w.VBox, [nav, self.title_html, tabs, self.target_html, self.outputs_html, trial])

        self.task_select.observe(self._on_task, names="value")
        self.slider.observe(self._on_index, names="value")
        self.jump.observe(self._on_index, names="value")
        self.prev_button.on_click(lambda _: (self.prev(), self._update_face()))
        self.next_button.on_click(lambda _: (self.next(), self._update_face()))
        self.score_button.on_click(lambda _: (self.try_output(self.output_box.value), self._update_face()))
        self.output_box.observe(self._on_typing, names="value")

    def _on_task(self, change: dict) -> None:
        if not self._syncing and change["new"] != self.task_id:
            self.select_task(change["new"])
            self._update_face()

    def _on_index(self, change: dict) -> None:
        if not self._syncing and change["new"] != self.index and self.items:
            self.show(change["new"])
            self._update_face()

    def _on_typing(self, change: dict) -> None:
        """Extraction is cheap and runs as you type; the grader waits for the Score button."""
        if not self._syncing:
            self._show_extraction_only(change["new"])

    def _sync_controls(self) -> None:
        last = max(len(self.items) - 1, 0)
        self._syncing = True
        try:
            for control in (self.slider, self.jump):
                control.max = last
                control.value = self.index
                control.disabled = not self.items
            self.prev_button.disabled = self.index <= 0
            self.next_button.disabled = self.index >= last
            self.score_button.disabled = not self.items
        finally:
            self._syncing = False

    def _render(self) -> None:
        task, item = self.task, self.item
        self.last_result = None
        if item is None:
            message = self._no_items_message()
            self.title_html.value = f"<b>task {h.esc(task.id)}</b>"
            body = h.error(message) if task.id in self._load_errors else h.note(message)
            self.prompt_html.value = body
            for view in (self.row_html, self.request_html, self.target_html, self.outputs_html, self.estimate_html):
                view.value = ""
            self.result_html.value = ""
            return
        self.title_html.value = (
            f"<b>task {h.esc(task.id)}</b> ({h.esc(task.type)}) &middot; item {item.index} "
            f"(items 0-{len(self.items) - 1})"
        )
        self.prompt_html.value = h.prompt_view(task, item)
        self.target_html.value = h.target_view(task, item)
        self.row_html.value = h.json_block(item.row)
        self.request_html.value = self._request_view(item)
        self.outputs_html.value = self._stored_view(item)
        if self._estimated != self.task_id:  # per task, not per item
            try:
                self.estimate_html.value = h.estimate_view(self.estimate, self.task_id)
            except Exception as exc:  # noqa: BLE001 - the estimate must never break the preview
                self.estimate_html.value = h.error(f"{type(exc).__name__}: {exc}")
            self._estimated = self.task_id
        self._show_extraction_only(self.output_box.value)

    def _request_view(self, item: "Item") -> str:
        parts = []
        if not self.request_models:
            parts.append(h.note(
                "No model given: this is the body a run's defaults send (the Responses API, POST "
                "<base_url>/responses of each model you run), with the model's name where it says "
                f"{MODEL_SLOT!r}. Pass models=[evalnb.Model(...)] to see each model's exact request "
                "(chat models, OpenAI-only fields)."))
            parts.append(h.json_block(self.request))
        for model in self.request_models:
            path = {"chat": "/chat/completions", "completions": "/completions"}.get(model.api, "/responses")
            label = f"{model.label}: " if len(self.request_models) > 1 else ""
            parts.append(h.note(f"{label}POST {model.base_url}{path}  (model {model.name!r}, api {model.api!r})"))
            gen = self.task_generation
            skipped = unsent_fields(gen, api=model.api, is_openai=model.is_openai)
            if skipped:
                parts.append(h.warning(f"not sent to this endpoint: {', '.join(skipped)}"))
            if self.task.generation is not None:
                sources = self.generation_sources
                parts.append(h.note("settings: " + ", ".join(f"{k}={gen[k]!r} ({sources[k]})" for k in gen)))
            parts.append(h.json_block(request_payload(model, item.prompt, gen)))
        return "".join(parts)

    def _stored_view(self, item: "Item") -> str:
        stored = self.outputs.get(self.task_id, {}).get(item.index)
        if not stored:
            return ""
        key = (self.task_id, item.index)
        if key not in self._stored_results:
            self._stored_results[key] = self._grade(item, stored)
        parts = [h.heading("Stored outputs")]
        for (label, text), result in zip(stored, self._stored_results[key]):
            name = f"stored output ({label})" if label else "stored output"
            shown = h.note("no output") if text is None else h.pre(text)
            parts.append(h.box(name, shown + h.result_view(result, "extracted and graded"),
                               css_class="evalnb-stored"))  # fmt: skip
        return "".join(parts)

    def _show_extraction_only(self, text: str) -> None:
        if not text or self.item is None:
            self.result_html.value = ""
            return
        extracted, problem = self._extract(text)
        result = {"extracted_output": extracted, "scores": {}, "error": problem}
        self.result_html.value = h.result_view(result, "your output (not graded yet)") + h.note(_SCORE_HINT)

    def _no_items_message(self) -> str:
        problem = self._load_errors.get(self.task_id)
        if problem:
            return f"task {self.task_id!r}: could not build items: {problem}"
        return f"task {self.task_id!r} has no items (its dataset has no rows)"

    # -- extraction and grading -----------------------------------------------------------------

    def _extract(self, text: str | None) -> tuple[str | None, str | None]:
        try:
            return make_extractor(self.task.extraction)(text), None
        except Exception as exc:  # a bad spec: validated at load, but never break the widget
            return None, f"output_extraction failed: {exc}"

    def _grade(self, item: "Item", outputs: list[tuple[str | None, str | None]]) -> list[dict[str, Any]]:
        """Extract each output, then run the task's grader on them in the sandbox (one call)."""
        results = []
        for _, text in outputs:
            extracted, problem = self._extract(text)
            if text is None:
                problem = "no stored output to grade"
            results.append({"extracted_output": extracted, "scores": {}, "error": problem})
        todo = [i for i, r in enumerate(results) if r["error"] is None]
        if not todo:
            return results
        samples = [self._sample(item, outputs[i][0], outputs[i][1], results[i]) for i in todo]
        try:
            grades = self._run_grader(item, samples)
        except Exception as exc:  # sandbox or spec problem: shown, not raised into the UI
            grades = [(None, f"{type(exc).__name__}: {exc}")] * len(todo)
        for i, (scores, problem) in zip(todo, grades):
            results[i]["scores"] = dict(scores or {})
            results[i]["error"] = problem
        return results

    def _sample(self, item: "Item", label: str | None, text: str | None, result: dict) -> dict:
        return {
            "task_id": self.task_id, "model": label or self._label, "sample_index": item.index,
            "prompt": item.prompt, "target": item.target, "output_text": text,
            "extracted_output": result["extracted_output"], "dataset_row": item.row,
            "response_id": None, "usage": None,
        }  # fmt: skip

    def _run_grader(self, item: "Item", samples: list[dict]) -> list[tuple[dict | None, str | None]]:
        from evalnb.scoring.grading import make_item

        grader = self._grader()
        grader_item = make_item(item.row, prompt=item.prompt, target=item.target,
                                choices=item.choices, sample_index=item.index)  # fmt: skip
        model = samples[0]["model"]
        if grader.execution == "per_sample":
            grades = grader.grade_samples_sync(samples, [grader_item] * len(samples), model=model)
            return [(g.scores, g.error) for g in grades]
        out = []  # an aggregate grader sees each output alone, as a batch of one
        for sample in samples:
            batch = grader.grade_batch_sync([sample], [grader_item], model=sample["model"])
            update = (batch.sample_updates or [None])[0]
            if batch.error or update is None:
                out.append((batch.metrics, batch.error))
            else:
                out.append(({**batch.metrics, **update.scores}, update.error))
        return out

    def _grader(self) -> Any:
        from evalnb.scoring.grading import Grader
        from evalnb.sandbox import default_pool

        grader = self._graders.get(self.task_id)
        if grader is None:
            task = self.task
            grader = Grader(task.grader, task_id=task.id, pool=default_pool(),
                            metadata=task.metadata or None)  # fmt: skip
            self._graders[self.task_id] = grader
        return grader


def _as_index(value: Any) -> int | None:
    """An integer position (numpy ints included), or None for anything else (bools too)."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        return None
    return int(value.__index__())


def _slot_model() -> Model:
    """What `estimate` counts with when no model is given (never called; its row is relabelled)."""
    return Model(MODEL_SLOT, base_url="http://127.0.0.1:9/v1")


def _as_model(model: Model | str) -> Model:
    if isinstance(model, str):
        return Model(model)
    if not isinstance(model, Model):
        raise TypeError(f"model must be an evalnb.Model or a model name, got {type(model).__name__}")
    return model
