"""What the widgets display: the live view and, as its own output, a static face with their content.

Displayed through a real IPython shell whose display publisher records what a kernel would send
(``capture_output``), so the outputs checked are the messages a notebook saves. Also `browse`'s
``task_id``, ``page_size`` and ``static_pages``, from a frame and from `RunResult.browse`.
"""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest

pytest.importorskip("ipywidgets")

from IPython.core.interactiveshell import InteractiveShell  # noqa: E402
from IPython.utils.capture import capture_output  # noqa: E402

from evalnb.results import RunResult  # noqa: E402
from evalnb.widgets import browse  # noqa: E402
from evalnb.widgets.markup import STATIC_FACE_CLASS, static_face  # noqa: E402

VIEW = "application/vnd.jupyter.widget-view+json"


def text_of(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", re.sub(r"<style>.*?</style>", "", fragment, flags=re.S)))


def frame(items: int = 12) -> pd.DataFrame:
    rows = []
    for task in ("t1", "t2"):
        for i in range(items):
            for model in ("m1", "m2"):
                answer = f"{task}-{i}-{model if i % 3 == 0 else 'same'}"
                rows.append({"task_id": task, "model": model, "sample_index": i, "status": "completed",
                             "prompt": f"{task} question {i}", "target": "x", "output_text": f"answer {answer}",
                             "extracted_output": answer, "error": None, "em": float(i % 2)})
    return pd.DataFrame(rows)


@pytest.fixture(scope="module", autouse=True)
def shell():
    return InteractiveShell.instance()


def test_display_gives_the_live_view_and_a_separate_static_face():
    b = browse(frame(), page_size=4, static_pages=1)
    with capture_output() as captured:
        b._ipython_display_()
    view, face = captured.outputs
    assert VIEW in view.data and "text/html" not in view.data  # nbconvert would prefer the view anyway
    assert f'class="{STATIC_FACE_CLASS}"' in face.data["text/html"]
    shown = text_of(face.data["text/html"])
    assert "items 1-4 of 24" in shown and "answer t1-0-m1" in shown and "answer t1-0-m2" in shown
    assert "t1 question 4" not in shown and "20 more item(s)" in shown


def test_the_face_follows_the_widget_controls_but_not_python_calls():
    b = browse(frame(), page_size=4, static_pages=1)
    with capture_output() as captured:
        b._ipython_display_()
        b.show_page(2)  # a Python call, e.g. from a later cell: the saved face must not change (nbval)
        b.next_button.click()  # the widget's own control
        b.filter_select.value = "disagreements"
    updates = [o for o in captured.outputs if o.update]
    assert len(updates) == 2
    assert "items 13-16 of 24" in text_of(updates[0].data["text/html"])  # page 4, after page 3
    last = text_of(updates[1].data["text/html"])
    assert "filter: disagreements" in last and "items 1-4 of 8" in last


def test_browse_task_id_page_size_and_static_pages():
    b = browse(frame(), task_id="t2", page_size=5, static_pages=None)
    assert {p.task_id for p in b.pages} == {"t2"} and b.page_count == 3
    assert [p.sample_index for p in b.page_items()] == [0, 1, 2, 3, 4]
    shown = text_of(b.static_html())
    assert "task t2" in shown and "items 1-12 of 12" in shown and "more item" not in shown
    assert shown.count("sample_index") == 12 and "t1 question" not in shown
    b.next()
    assert b.page_number == 1 and [p.sample_index for p in b.page_items()] == [5, 6, 7, 8, 9]
    assert "answer t2-5-same" in b.page_html.value and "answer t2-4" not in b.page_html.value
    two = browse(frame(), page_size=3, static_pages=2)
    assert "items 1-6 of 24" in text_of(two.static_html()) and "18 more item(s)" in text_of(two.static_html())


def test_browse_rejects_bad_view_options():
    with pytest.raises(ValueError, match="unknown task_id 'nope'; the samples have: t1, t2"):
        browse(frame(), task_id="nope")
    with pytest.raises(ValueError, match="page_size must be a positive integer, got 0"):
        browse(frame(), page_size=0)
    with pytest.raises(ValueError, match="static_pages must be a positive integer"):
        browse(frame(), static_pages=-1)
    with pytest.raises(IndexError, match=r"no page 9 \(valid: 0-5\)"):
        browse(frame(), page_size=4).show_page(9)


def test_run_result_browse_takes_task_id_and_page_size():
    records = frame().assign(scores=lambda f: [{"em": v} for v in f.em]).drop(columns=["em"]).to_dict("records")
    result = RunResult.from_data(records, run={"run_id": "r", "status": "completed",
                                               "models": [{"label": "m1"}, {"label": "m2"}]})
    b = result.browse(task_id="t1", page_size=6)
    assert {p.task_id for p in b.pages} == {"t1"} and len(b.page_items()) == 6


def test_static_face_hides_only_beside_a_drawn_widget():
    face = static_face("<b>hello</b>")["text/html"]
    assert "<b>hello</b>" in face
    rule = re.search(r"<style>(.*?)</style>", face).group(1)
    assert ".widget-box" in rule and "display:none" in rule
    assert ".jupyter-widgets " not in rule  # nbconvert's empty widget placeholder has that class
