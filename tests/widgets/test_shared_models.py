"""evalnb's widgets share their Layout and style models, so a saved notebook holds each once.

A notebook executed by nbclient saves every live widget model; ipywidgets gives each widget a
Layout (~1.1 kB of nulls) and a style of its own. Here the widgets of two browse views and a
progress panel with four candidates are built and the Layout and style models they create are
counted, as the saved state would list them.
"""

from __future__ import annotations

import pytest

w = pytest.importorskip("ipywidgets")

from ipywidgets.widgets import widget as widget_module  # noqa: E402

from evalnb.results import RunResult  # noqa: E402
from evalnb.runner.progress import RunProgress, WidgetDisplay  # noqa: E402


def _result(run_id):
    samples = [{"task_id": "t", "model": m, "sample_index": i, "epoch": 0, "status": "completed", "prompt": f"Q{i}",
                "target": "x", "output_text": "4", "extracted_output": "4", "scores": {"em": 1}}
               for m in ("a", "b") for i in range(12)]
    return RunResult.from_data(samples, run={"run_id": run_id, "status": "completed",
                                             "models": [{"label": "a"}, {"label": "b"}]})


def _models_made(build):
    """The model names of the widgets ``build()`` created (as they would be saved)."""
    before = set(widget_module._instances)
    build()
    return [widget_module._instances[k].get_state()["_model_name"] for k in set(widget_module._instances) - before]


def _shared_kinds(names):
    return [n for n in names if n == "LayoutModel" or n.endswith("StyleModel")]


def test_browse_widgets_share_one_layout_and_their_styles():
    _models_made(lambda: _result("warm").browse())  # the shared models exist from the first widget on
    made = _models_made(lambda: [_result(f"v{i}").browse() for i in range(2)])
    assert made.count("HTMLModel") >= 4  # the widgets were built
    assert _shared_kinds(made) == []  # and no Layout or style of their own


def test_a_progress_panel_adds_no_layout_or_style_per_candidate():
    def panel():
        p = RunProgress(run_id="eval_run_x")
        for variant in ("a", "b"):
            for model in ("m", "n"):
                p.model(model, f"t@{variant}").total = 3
        display = WidgetDisplay(p)
        display.handle = None
        display.close()
        assert len(display.rows) == 4

    _models_made(panel)
    made = _models_made(panel)
    assert made.count("IntProgressModel") == 4
    assert _shared_kinds(made) == []


def test_a_closed_shared_layout_is_made_again():
    from evalnb.widgets.shared import layout

    first = layout()
    first.close()
    again = layout()
    assert again is not first and again.comm is not None
    assert w.HTML(layout=again).layout is again
