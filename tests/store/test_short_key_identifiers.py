"""A short key that is also part of a model's label or name (api_key="mock" for "mock-model",
as local stand-in servers are often set up) masks the key everywhere it appears in text, but
never the run's identifiers: its records must name the model as its samples do, or the metrics
would count a phantom "[redacted]-model" that never ran and a resume would call a model of that name."""

from __future__ import annotations

import evalnb
from evalnb.store import Store

ROWS = [{"q": f"q{i}", "a": "yes"} for i in range(4)]


def test_a_short_key_inside_the_label_leaves_the_run_record_naming_the_model(make_suite, model_server, tmp_path):
    server = model_server(lambda body: "yes, mock says")
    suite = make_suite({"t": ROWS})
    model = evalnb.Model("mock-model", base_url=server.base_url, api="chat", api_key="mock")
    store = tmp_path / "s.sqlite"
    result = evalnb.run(suite, [model], progress=False, store=store)

    metrics = result.metrics
    assert list(metrics["model"].unique()) == ["mock-model"]  # no phantom "[redacted]-model" row
    assert int(metrics["n"].sum()) == len(ROWS)
    record = Store(store).get_run(result.run_id)
    assert [m["label"] for m in record["models"]] == ["mock-model"]
    assert list((record["summary"].get("planned") or {})["t"]) == ["mock-model"]
    # the key itself is still masked in stored text: the answer echoed it
    assert all("mock says" not in (t or "") for t in result.samples["output_text"])

    # resuming the caller's own run is not refused as foreign, and sends to the model by its name
    before = len(server.requests)
    evalnb.resume(result.run_id, store=store, progress=False)
    assert all(r["body"]["model"] == "mock-model" for r in server.requests[before:])


def test_a_label_shaped_like_a_key_is_still_masked_in_the_run_record(make_suite, model_server, tmp_path):
    server = model_server(lambda body: "yes")
    label = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2
    suite = make_suite({"t": ROWS})
    model = evalnb.Model("m", base_url=server.base_url, api="chat", api_key="a-long-enough-key", label=label)
    store = tmp_path / "s.sqlite"
    result = evalnb.run(suite, [model], progress=False, store=store)
    record = Store(store).get_run(result.run_id)
    assert label not in str(record["models"])
