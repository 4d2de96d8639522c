"""The preview and browse widgets, driven as Python objects (no browser, real sandbox grader)."""

from __future__ import annotations

import asyncio
import html
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from evalnb.errors import ManifestError
from evalnb.suite import Suite
from evalnb.providers import Model
from evalnb.widgets import BrowseWidget, PreviewWidget, browse, preview

ROWS = [
    {"question": "What is 1+1?", "options": "A) 2 B) 3", "answer": "A"},
    {"question": "Capital of France?", "options": "A) Rome B) Paris", "answer": "B"},
    {"question": "Sky colour?", "options": "A) Blue B) Red", "answer": "A"},
    {"question": "Largest planet?", "answer": "B"},  # no "options": a missing field
    {"question": "Ice is <cold> & \"hard\"?", "options": "A) yes B) no", "answer": "A"},
]
EXACT_MATCH = "def grade(sample, item):\n    return sample['extracted_output'] == item['target']\n"
RAISING = "def grade(sample, item):\n    raise ValueError('grader exploded on target ' + item['target'])\n"


@pytest.fixture
def suite(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    (tmp_path / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    manifest = {
        "tasks": [
            {
                "id": "mc",
                "type": "multiple_choice",
                "dataset": {"path": "qa.jsonl"},
                "prompt_template": "Q: {{question}}\n{{options}}\nAnswer:",
                "target_template": "{{answer}}",
                "fewshot": {"count": 2},
                "output_extraction": {"type": "regex", "pattern": "Answer:\\s*([A-D])", "flags": "i"},
                "grader": {"type": "python", "source": EXACT_MATCH},
            },
            {
                "id": "boom",
                "name": "Raising grader",
                "type": "qa",
                "dataset": {"path": "qa.jsonl"},
                "prompt_template": "Say: {{question}}",
                "target_template": "{{answer}}",
                "grader": {"type": "python", "source": RAISING},
            },
            {
                "id": "gone",
                "type": "qa",
                "dataset": {"path": "missing.jsonl"},
                "prompt_template": "{{question}}",
                "grader": {"type": "python", "source": EXACT_MATCH},
            },
        ]
    }
    return Suite.from_dict(manifest, base_dir=tmp_path)


def text_of(fragment: str) -> str:
    """What a reader sees: tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def evaluated_box(prompt_html: str) -> str:
    """The text of the highlighted evaluated-prompt box (few-shot boxes excluded)."""
    start = prompt_html.index("evalnb-prompt")
    return text_of(prompt_html[prompt_html.index(">", start) + 1 :])


def payload(request_html: str) -> dict:
    """The JSON body shown in the request view, parsed back."""
    blocks = re.findall(r"<pre[^>]*>(.*?)</pre>", request_html, flags=re.S)
    return json.loads(html.unescape(blocks[-1]))


# -- navigation ---------------------------------------------------------------------------------


def test_initial_state_shows_first_item_of_first_task(suite):
    w = preview(suite)
    items = suite.items("mc")
    assert isinstance(w, PreviewWidget)
    assert (w.task_id, w.index) == ("mc", 0)
    assert w.task_select.value == "mc"
    assert [value for _, value in w.task_select.options] == ["mc", "boom", "gone"]
    assert (w.slider.max, w.jump.max) == (4, 4)
    assert w.prev_button.disabled and not w.next_button.disabled
    assert evaluated_box(w.prompt_html.value) == "evaluated prompt (row 0)" + items[0].question


def test_next_prev_slider_jump_and_buttons_move_the_index(suite):
    w = preview(suite, "mc")
    items = suite.items("mc")

    def at(index: int) -> None:
        assert w.index == index
        assert w.slider.value == index and w.jump.value == index
        box = evaluated_box(w.prompt_html.value)
        assert box.startswith(f"evaluated prompt (row {index})Q: {ROWS[index]['question']}\n")
        assert items[index].row == ROWS[index]

    w.next()
    at(1)
    w.slider.value = 3
    at(3)
    w.jump.value = 2
    at(2)
    w.next_button.click()
    at(3)
    w.prev_button.click()
    w.prev()
    at(1)
    w.show(4)
    at(4)
    assert "Ice is <cold> & \"hard\"?" in text_of(w.prompt_html.value)  # escaped, shown as is
    assert "<cold>" not in w.prompt_html.value


def test_navigation_stops_at_both_edges(suite):
    w = preview(suite, "mc")
    w.prev()
    assert w.index == 0 and w.prev_button.disabled
    w.show(4)
    assert w.next_button.disabled and not w.prev_button.disabled
    w.next()
    w.next_button.click()
    assert w.index == 4
    w.jump.value = 99  # a BoundedIntText clamps to its max
    assert w.index == 4 and w.jump.value == 4
    for bad in (-1, 5, "2", True, 2.0):
        with pytest.raises(IndexError, match="valid: 0-4"):
            w.show(bad)
    assert w.index == 4
    w.show(np.int64(2))  # an index taken from a DataFrame
    assert w.index == 2 and w.slider.value == 2


def test_limit_bounds_items_and_is_validated(suite):
    w = preview(suite, "mc", limit=2)
    assert len(w.items) == 2 and w.slider.max == 1
    one = preview(suite, "mc", limit=1)
    assert one.slider.max == 0 and one.prev_button.disabled and one.next_button.disabled
    one.next()
    assert one.index == 0
    for bad in (0, -3, 1.5, True):
        with pytest.raises(ValueError, match="limit must be a positive integer"):
            preview(suite, "mc", limit=bad)


# -- the prompt view ------------------------------------------------------------------------------


def test_fewshot_examples_are_separate_marked_blocks(suite):
    w = preview(suite, "mc")
    item = w.item
    value = w.prompt_html.value
    assert value.count('class="evalnb-box evalnb-example') == 2
    assert value.count('class="evalnb-box evalnb-prompt') == 1
    assert "example 1 (row 1)" in value and "example 2 (row 2)" in value
    assert value.index("example 2 (row 2)") < value.index("evalnb-prompt")
    shown = re.findall(r"evalnb-example.*?<pre[^>]*>(.*?)</pre>", value, flags=re.S)
    assert [html.unescape(text) for text in shown] == [ex.text for ex in item.fewshot]
    # examples + separator + evaluated prompt reassemble exactly the prompt that is sent
    assert "\n\n".join([ex.text for ex in item.fewshot] + [item.question]) == item.prompt


def test_field_spans_are_highlighted_with_the_field_name_in_the_title(suite):
    w = preview(suite, "mc")
    value = w.prompt_html.value
    assert re.search(r'<span class="evalnb-field" data-field="question" title="\{\{question\}\}"'
                     r'[^>]*>What is 1\+1\?</span>', value)  # fmt: skip
    assert re.search(r'data-field="options" title="\{\{options\}\}"[^>]*>A\) 2 B\) 3</span>', value)
    assert re.search(r'data-field="answer" title="\{\{answer\}\}"[^>]*>A</span>', w.target_html.value)
    assert "missing fields" not in value


def test_missing_field_is_flagged_and_marked(suite):
    w = preview(suite, "mc")
    w.show(3)
    value = w.prompt_html.value
    assert "missing fields: options" in text_of(value)
    assert re.search(r'class="evalnb-missing" data-field="options" title="missing field: options', value)
    w.next()
    assert "missing fields" not in w.prompt_html.value


# -- the request payload ----------------------------------------------------------------------------


def test_request_payload_responses_api_holds_exact_prompt_and_model(suite):
    w = preview(suite, "mc")
    w.show(1)
    prompt = w.item.prompt
    assert w.request == {"model": "<model>", "input": prompt}  # no model given: no provider invented
    assert payload(w.request_html.value) == w.request
    assert html.escape(json.dumps(prompt, ensure_ascii=False)) in w.request_html.value
    assert "/responses" in w.request_html.value


def test_request_payload_chat_api_with_generation(suite):
    model = Model("local-model", base_url="http://127.0.0.1:9/v1", api="chat")
    gen = {"instructions": "Be brief.", "temperature": 0, "max_gen_toks": 16, "timeout_seconds": 30}
    w = preview(suite, "mc", model=model, generation=gen)
    body = payload(w.request_html.value)
    assert body["model"] == "local-model"
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": w.item.prompt},
    ]
    assert body["max_tokens"] == 16 and body["temperature"] == 0
    assert "timeout_seconds" not in body  # execution controls are never sent
    assert "/chat/completions" in w.request_html.value
    assert html.escape(json.dumps(w.item.prompt, ensure_ascii=False)) in w.request_html.value


def test_request_payload_warns_about_fields_the_endpoint_will_not_get(suite):
    w = preview(suite, "mc", model="gpt-4.1-mini", generation={"top_k": 5, "temperature": 0.5})
    assert "not sent to this endpoint: top_k" in text_of(w.request_html.value)
    assert w.request == {"model": "gpt-4.1-mini", "input": w.item.prompt, "temperature": 0.5}


def test_without_models_the_preview_shows_the_run_defaults_and_invents_no_provider(suite):
    w = preview(suite, "mc")
    view = text_of(w.request_html.value)
    assert "api.openai.com" not in view and "your-model" not in view and "OPENAI" not in view
    assert "No model given" in view and "POST <base_url>/responses" in view
    assert payload(w.request_html.value) == {"model": "<model>", "input": w.item.prompt}
    estimate = text_of(w.estimate_html.value)
    assert "no price" not in estimate and "<model>" not in estimate
    assert "(any model)" in estimate and f"{len(w.items):,}" in estimate and "pass models=" in estimate
    static = text_of(w.static_html())
    assert "api.openai.com" not in static and "no price for" not in static


def test_the_request_tab_shows_the_models_given_not_a_placeholder(suite):
    strong = Model("strong", base_url="http://127.0.0.1:9/v1", api="chat")
    weak = Model("weak", base_url="http://127.0.0.1:8/v1")
    w = preview(suite, "mc", models=[strong, weak])
    view = text_of(w.request_html.value)
    assert "your-model" not in view and "api.openai.com" not in view
    assert "strong: POST http://127.0.0.1:9/v1/chat/completions" in view
    assert "weak: POST http://127.0.0.1:8/v1/responses" in view
    assert w.request["model"] == "strong" and w.request["messages"][-1]["content"] == w.item.prompt


def test_bad_model_and_generation_are_rejected(suite):
    with pytest.raises(ManifestError, match="generation.temperature"):
        preview(suite, generation={"temperature": 9})
    with pytest.raises(TypeError, match="model must be"):
        preview(suite, model=42)
    with pytest.raises(KeyError, match="its tasks are: mc, boom, gone"):
        preview(suite, "nope")


# -- trying outputs ----------------------------------------------------------------------------------


def test_try_output_extracts_and_grades_in_the_sandbox(suite):
    w = preview(suite, "mc")
    w.show(1)  # target B
    assert w.try_output("Answer: B") == {"extracted_output": "B", "scores": {"score": 1.0}, "error": None}
    assert "score" in text_of(w.result_html.value) and "'B'" in text_of(w.result_html.value)
    w.show(0)  # target A
    assert w.try_output("answer:  B") == {"extracted_output": "B", "scores": {"score": 0.0}, "error": None}
    assert w.try_output("I have no idea")["extracted_output"] is None
    assert w.output_box.value == "I have no idea"


def test_typing_only_extracts_and_score_button_grades(suite):
    w = preview(suite, "mc")
    w.show(1)
    w.output_box.value = "Answer: B"
    assert w.last_result is None  # typing does not run the grader
    assert "not graded yet" in w.result_html.value and "evalnb-scores" not in w.result_html.value
    assert "'B'" in text_of(w.result_html.value)
    w.score_button.click()
    assert w.last_result == {"extracted_output": "B", "scores": {"score": 1.0}, "error": None}
    assert "evalnb-scores" in w.result_html.value
    w.next()  # a new item: the old score no longer applies
    assert w.last_result is None and "not graded yet" in w.result_html.value


def test_raising_grader_shows_its_message(suite):
    w = preview(suite, "boom")
    result = w.try_output("Answer: A")
    assert result["scores"] == {}
    assert "ValueError" in result["error"] and "grader exploded on target A" in result["error"]
    assert "grader exploded on target A" in text_of(w.result_html.value)
    with pytest.raises(TypeError):
        w.try_output(None)


def test_aggregate_grader_grades_the_output_as_a_batch_of_one(suite):
    source = (
        "def grade_batch(samples):\n"
        "    s = samples[0]\n"
        "    ok = s['extracted_output'] == s['item']['target']\n"
        "    return {'metrics': {'n': len(samples)}, 'samples': [{'scores': {'acc': ok}}]}\n"
    )
    task = suite.task("mc").model_dump(exclude_none=True)
    task["grader"] = {"type": "python", "contract": "batch", "source": source}
    batch_suite = Suite.from_dict({"tasks": [task]}, base_dir=suite.base_dir)
    w = preview(batch_suite)
    assert w.try_output("Answer: A") == {"extracted_output": "A", "scores": {"n": 1.0, "acc": 1.0}, "error": None}
    assert w.try_output("Answer: C")["scores"] == {"n": 1.0, "acc": 0.0}


def test_try_output_works_inside_a_running_event_loop(suite):
    w = preview(suite, "mc")

    async def in_notebook():  # Jupyter runs cells inside a live loop
        return w.try_output("Answer: A")

    assert asyncio.run(in_notebook())["scores"] == {"score": 1.0}


# -- tasks ---------------------------------------------------------------------------------------------


def test_switching_tasks_resets_index_and_views(suite):
    w = preview(suite, "mc")
    w.show(3)
    mc_items = w.items
    w.task_select.value = "boom"
    assert (w.task_id, w.index, w.slider.value) == ("boom", 0, 0)
    assert evaluated_box(w.prompt_html.value) == "evaluated prompt (row 0)Say: What is 1+1?"
    assert "evalnb-example" not in w.prompt_html.value  # this task has no few-shot
    assert "Raising grader" in dict((v, k) for k, v in w.task_select.options)["boom"]
    w.select_task("mc")
    assert w.task_select.value == "mc" and w.index == 0
    assert w.items is mc_items  # items are built once per task
    with pytest.raises(KeyError):
        w.select_task("nope")


def test_task_whose_data_cannot_load_shows_the_error(suite):
    w = preview(suite, "mc")
    w.select_task("gone")
    assert w.items == [] and w.item is None and w.request is None
    assert "missing.jsonl" in text_of(w.prompt_html.value)
    assert w.slider.disabled and w.jump.disabled and w.score_button.disabled
    assert "could not build items" in w.try_output("x")["error"]
    with pytest.raises(IndexError, match="no items"):
        w.show(0)
    w.select_task("mc")  # the other tasks still work
    assert w.item.index == 0 and not w.slider.disabled


# -- stored outputs ---------------------------------------------------------------------------------


def test_stored_outputs_dict_are_extracted_and_graded(suite):
    w = preview(suite, "mc", outputs={1: "Answer: B", 2: "Answer: B"})
    assert w.outputs_html.value == ""  # nothing stored for item 0
    w.show(1)
    shown = text_of(w.outputs_html.value)
    assert "stored output" in shown and "Answer: B" in shown and "'B'" in shown
    assert re.search(r"score\s*1\b", shown)
    w.show(2)  # target A
    assert re.search(r"score\s*0\b", text_of(w.outputs_html.value))


def test_stored_outputs_frame_with_models_and_tasks(suite):
    frame = pd.DataFrame(
        {
            "task_id": ["mc", "mc", "boom"],
            "model": ["alpha", "beta", "alpha"],
            "sample_index": [1, 1, 0],
            "output_text": ["Answer: B", None, "Answer: A"],
        }
    )
    w = preview(suite, "mc", outputs=frame)
    w.show(1)
    shown = text_of(w.outputs_html.value)
    assert "stored output (alpha)" in shown and "stored output (beta)" in shown
    assert "no stored output to grade" in shown
    w.select_task("boom")
    assert "grader exploded on target A" in text_of(w.outputs_html.value)


def test_bad_outputs_are_rejected(suite):
    with pytest.raises(ValueError, match="missing column.*output_text"):
        preview(suite, outputs=pd.DataFrame({"sample_index": [0]}))
    with pytest.raises(TypeError, match="outputs must be a dict"):
        preview(suite, outputs=["Answer: A"])
    with pytest.raises(TypeError, match="sample_index must be an integer"):
        preview(suite, outputs={"one": "Answer: A"})
    with pytest.raises(TypeError, match="must be a string"):
        preview(suite, outputs={0: 3})


# -- display -------------------------------------------------------------------------------------------


def test_static_html_and_mimebundle_carry_the_prompt(suite):
    w = preview(suite, "mc")
    w.show(2)
    static = w.static_html()
    assert w.item.question in text_of(static)
    assert "Sky colour?" in text_of(static) and "&lt;model&gt;" in static
    assert w._repr_html_() == static
    bundle = w._repr_mimebundle_()
    assert bundle["text/html"] == static
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == w.widget.model_id
    assert bundle["text/plain"] == "PreviewWidget(task='mc', index=2, items=5)"


def test_nbconvert_export_without_widget_state_shows_the_static_fallback(suite):
    import nbformat
    from nbconvert import HTMLExporter

    w = preview(suite, "mc")
    w.show(1)
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("evalnb.preview(suite)")
    cell.outputs = [nbformat.v4.new_output("display_data", data=w._repr_mimebundle_())]
    nb.cells.append(cell)
    body, _ = HTMLExporter().from_notebook_node(nb)
    assert "Capital of France?" in html.unescape(body)
    assert "evalnb-prompt" in body


def test_importing_the_widgets_package_stays_light():
    code = "import sys, evalnb.widgets; print(sorted({'ipywidgets', 'pandas'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# -- browse ------------------------------------------------------------------------------------------


def run_frame() -> pd.DataFrame:
    rows = []

    def add(task, model, index, extracted, score, status="completed", error=None):
        rows.append({
            "task_id": task, "model": model, "sample_index": index, "status": status,
            "prompt": f"{task} prompt {index}", "target": "A", "output_text": f"out {extracted}",
            "extracted_output": extracted, "error": error, "accuracy": score,
            "latency_s": 0.5 + index,
        })  # fmt: skip

    # task t1: 0 agree; 1 disagree on output; 2 same output, different score; 3 m2 failed
    add("t1", "m1", 0, "A", 1.0)
    add("t1", "m2", 0, "A", 1.0)
    add("t1", "m1", 1, "A", 1.0)
    add("t1", "m2", 1, "B", 0.0)
    add("t1", "m1", 2, "A", 1.0)
    add("t1", "m2", 2, "A", 0.0)
    add("t1", "m1", 3, "A", 1.0)
    add("t1", "m2", 3, None, None, status="failed", error="ProviderError: 500")
    # task t2: only m1; 0 fine, 1 extraction found nothing
    add("t2", "m1", 0, "A", 1.0)
    add("t2", "m1", 1, None, 0.0)
    return pd.DataFrame(rows)


def test_browse_counts_and_filters():
    b = browse(run_frame())
    assert isinstance(b, BrowseWidget)
    assert b.metrics == ["accuracy"]  # latency_s is a known, non-metric numeric column
    assert b.counts == {"all": 6, "failures": 2, "disagreements": 3}
    assert [(p.task_id, p.sample_index) for p in b.pages] == [
        ("t1", 0), ("t1", 1), ("t1", 2), ("t1", 3), ("t2", 0), ("t2", 1),
    ]  # fmt: skip
    b.filter_select.value = "failures"
    assert b.filter == "failures" and b.index == 0
    assert [(p.task_id, p.sample_index) for p in b.pages] == [("t1", 3), ("t2", 1)]
    b.set_filter("disagreements")
    assert [(p.task_id, p.sample_index) for p in b.pages] == [("t1", 1), ("t1", 2), ("t1", 3)]
    assert b.filter_select.value == "disagreements"
    assert [label for label, _ in b.filter_select.options] == ["all (6)", "failures (2)", "disagreements (3)"]


def test_browse_page_shows_every_model_side_by_side():
    b = browse(run_frame(), filter="failures", page_size=1)
    page = b.page_html.value
    assert "m1" in page and "m2" in page
    assert "out A" in text_of(page) and "ProviderError: 500" in text_of(page)
    assert "t1 prompt 3" in text_of(page) and "accuracy" in page
    assert "evalnb-differs" in page  # m2's extracted output differs from m1's
    b.next()
    assert (b.page.task_id, b.page.sample_index) == ("t2", 1) and b.slider.value == 1
    b.next()  # the last page stays
    assert b.index == 1 and b.next_button.disabled
    b.prev_button.click()
    assert b.index == 0
    assert "t1 prompt 3" in text_of(b.static_html())
    assert set(b._repr_mimebundle_()) >= {"text/html", "application/vnd.jupyter.widget-view+json"}


def test_browse_shows_what_the_grader_printed_also_for_a_failed_sample():
    frame = run_frame()
    frame["log"] = [None] * len(frame)
    failed = (frame.model == "m2") & (frame.sample_index == 3)
    frame.loc[failed, "log"] = "checking <A> against 'A'\nTraceback: boom\n"
    b = browse(frame, filter="failures", page_size=1)
    page = b.page_html.value
    assert "grader output" in page and "checking &lt;A&gt; against &#x27;A&#x27;" in page  # escaped, shown
    assert "Traceback: boom" in text_of(b.static_html())
    assert b.metrics == ["accuracy"]  # log is not a metric
    b.next()  # t2 / 1: nobody printed anything, no log row
    assert "grader output" not in b.page_html.value


def test_browse_models_filter_and_empty_result():
    b = browse(run_frame(), models=["m1"], filter="disagreements")
    assert b.models == ["m1"] and b.counts["disagreements"] == 0
    assert b.page is None and b.slider.disabled
    assert "matches filter" in text_of(b.page_html.value)
    with pytest.raises(IndexError, match="matches no page"):
        b.show(0)
    b.set_filter("all")
    assert len(b.pages) == 6 and "m2" not in b.page_html.value


def test_browse_reads_unknown_numeric_and_scores_dict_columns_as_metrics():
    frame = run_frame().drop(columns=["accuracy"])
    frame["f1.macro"] = [0.5] * len(frame)
    frame["scores"] = [{"judge_score": float(i % 2)} for i in range(len(frame))]
    b = browse(frame)
    assert b.metrics == ["f1.macro", "judge_score"]
    assert "judge_score" in b.page_html.value


def test_browse_rejects_bad_input():
    with pytest.raises(ValueError, match="missing column.*sample_index"):
        browse(pd.DataFrame({"task_id": ["t"], "model": ["m"]}))
    with pytest.raises(ValueError, match="unknown filter 'wrong'"):
        browse(run_frame(), filter="wrong")
    with pytest.raises(ValueError, match="unknown model.*'m9'.*m1, m2"):
        browse(run_frame(), models=["m9"])
    with pytest.raises(TypeError, match="samples DataFrame"):
        browse([{"task_id": "t"}])
    b = browse(run_frame())
    with pytest.raises(ValueError, match="unknown filter"):
        b.set_filter("nope")


def test_browse_with_suite_boxes_fewshot_examples(suite):
    items = suite.items("mc")
    frame = pd.DataFrame([
        {"task_id": "mc", "model": m, "sample_index": 1, "status": "completed",
         "prompt": items[1].prompt, "target": "B", "output_text": "Answer: B",
         "extracted_output": "B", "error": None, "score": 1.0}
        for m in ("m1", "m2")
    ])  # fmt: skip
    b = browse(frame, suite=suite)
    page = b.page_html.value
    assert page.count("evalnb-example") == 2 and "example 1 (row 0)" in page
    assert 'title="{{question}}"' in page
