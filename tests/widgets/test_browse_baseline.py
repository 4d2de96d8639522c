"""RunResult.browse(baseline=...): each model's baseline output beside its new one, filter "changed"."""

from __future__ import annotations

import pytest

pytest.importorskip("ipywidgets")

from evalnb.results import RunResult  # noqa: E402
from evalnb.widgets import browse  # noqa: E402

# item 0 unchanged, item 1 fixed for "a", item 2 broken for "b", item 3 same score, new wording
OLD = {("a", 0): (1, "4"), ("a", 1): (0, "5"), ("a", 2): (1, "7"), ("a", 3): (1, "9"),
       ("b", 0): (1, "4"), ("b", 1): (1, "6"), ("b", 2): (1, "7"), ("b", 3): (0, "1")}
NEW = {**OLD, ("a", 1): (1, "6"), ("b", 2): (0, "8"), ("a", 3): (1, "nine")}


def _result(table, run_id, epochs=1):
    samples = [
        {"task_id": "t", "model": m, "sample_index": i, "epoch": e, "status": "completed", "prompt": f"Q{i} {run_id}",
         "target": "x", "output_text": f"{out} (epoch {e})", "extracted_output": out, "scores": {"em": score}}
        for (m, i), (score, out) in table.items() for e in range(epochs)
    ]
    return RunResult.from_data(samples, run={"run_id": run_id, "status": "completed",
                                             "models": [{"label": "a"}, {"label": "b"}]})


def test_changed_pages_show_baseline_beside_new():
    before, after = _result(OLD, "v1"), _result(NEW, "v2")
    view = after.browse(baseline=before)
    assert view.filter == "changed"
    assert [(p.task_id, p.sample_index) for p in view.pages] == [("t", 1), ("t", 2)]
    assert view.models == ["a (baseline)", "a", "b (baseline)", "b"]
    page = view.pages[0]
    assert [(s["model"], s["extracted_output"], s["em"]) for s in page.samples] == [
        ("a (baseline)", "5", 0.0), ("a", "6", 1.0), ("b (baseline)", "6", 1.0), ("b", "6", 1.0)]
    html = view.static_html()
    assert "a (baseline)" in html and "score changed" in html
    view.set_filter("all")
    assert len(view.pages) == 4 and view.counts["changed"] == 2
    assert "changed (2)" in [label for label, _ in view.filter_select.options]


def test_browse_with_epochs_shows_one_epoch():
    result = _result(NEW, "v2", epochs=3)
    assert "(epoch 0)" in result.browse().pages[0].samples[0]["output_text"]
    assert "(epoch 2)" in result.browse(epoch=2).pages[0].samples[0]["output_text"]
    with pytest.raises(ValueError, match="epoch must be an integer from 0 to 2"):
        result.browse(epoch=3)


def test_changed_needs_a_baseline():
    result = _result(NEW, "v2")
    with pytest.raises(ValueError, match="filter 'changed' needs a baseline"):
        result.browse(filter="changed")
    plain = result.browse()
    assert "changed" not in [name for _, name in plain.filter_select.options]
    with pytest.raises(ValueError, match="unknown filter 'nope'"):
        plain.set_filter("nope")
    with pytest.raises(TypeError, match="baseline must be a RunResult"):
        result.browse(baseline=result.samples)
    widget = browse(result.samples, changed={("t", 3)}, filter="changed")
    assert [p.sample_index for p in widget.pages] == [3]
