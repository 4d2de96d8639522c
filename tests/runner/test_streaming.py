"""Streaming runs: a task's items are never all in memory, and the planner's stretches of
items (planner.CHUNK) decide kept, copied, cached and new samples exactly as before."""

from __future__ import annotations

import gc
import json

import pytest

import evalnb
from evalnb import Model
from evalnb.runner import engine
from evalnb.runner.item_planner import CHUNK
from evalnb.suite.items import Item
from helpers.runner_kit import EXACT, responder, rows, write_jsonl

pytestmark = pytest.mark.usefixtures("evalnb_home")


def test_a_run_never_holds_every_item_of_a_big_task(make_suite, model_server, monkeypatch):
    """The old engine built a list of all Items (and a todo list over them) before its first call.

    A task of up to KEEP_ITEMS items is kept from the survey to the work pass (see the next
    test); lowered here so that this 12k-item task counts as big.
    """
    monkeypatch.setattr(engine, "KEEP_ITEMS", 2 * CHUNK)
    n = 12 * CHUNK
    seen: list[int] = []

    def counting(body):
        seen.append(0)
        if len(seen) % 1500 == 0:  # now and then, count the Items alive in this process
            seen.append(sum(1 for o in gc.get_objects() if type(o) is Item))
        return responder(body)

    suite = make_suite({"big": rows(n)})
    server = model_server(counting, record=False)
    result = evalnb.run(suite, [Model("m", base_url=server.base_url, api="chat")], concurrency=8, progress=False)
    assert result.status == "completed" and result.run["counts"]["completed"] == n
    alive = [x for x in seen if x]
    assert alive and max(alive) < n / 2  # a few stretches in flight, not the task


@pytest.mark.parametrize("keep, renders_per_row", [(None, 2), (CHUNK, 4)])
def test_a_small_task_is_read_and_rendered_once(make_suite, model_server, monkeypatch, keep, renders_per_row):
    """Up to KEEP_ITEMS items the work pass reuses the survey's items (a prompt and a target
    rendered per row); a bigger task is read and rendered again, as it streams."""
    import evalnb.suite.items as items_module

    if keep is not None:
        monkeypatch.setattr(engine, "KEEP_ITEMS", keep)
    renders = []
    real = items_module.render_template
    monkeypatch.setattr(items_module, "render_template", lambda *a: renders.append(1) or real(*a))
    n = 3 * CHUNK
    suite = make_suite({"qa": rows(n)})
    server = model_server()
    result = evalnb.run(suite, [Model("m", base_url=server.base_url, api="chat")], progress=False)
    assert result.status == "completed" and server.request_count == n
    assert result.samples["status"].eq("completed").all()
    assert len(renders) == renders_per_row * n


def test_stretches_keep_reuse_and_resume_exact_across_boundaries(make_suite, model_server, tmp_path):
    n = 2 * CHUNK + 500
    suite = make_suite({"qa": rows(n)})
    server = model_server()
    model = Model("m", base_url=server.base_url, api="chat")
    first = evalnb.run(suite, [model], progress=False)
    assert server.request_count == n
    # edit rows on both sides of a stretch boundary and in the last stretch
    data = rows(n)
    for i in (CHUNK - 1, CHUNK, 2 * CHUNK + 499):
        data[i] = {**data[i], "q": data[i]["q"] + " (edited)"}
    write_jsonl(tmp_path / "data" / "qa.jsonl", data)
    server.reset()
    edited = evalnb.Suite.from_dict(suite.to_dict(), base_dir=suite.base_dir)
    second = evalnb.run(edited, [model], progress=False)
    assert server.request_count == 3  # only the edited prompts were asked
    changed = set(second.samples.loc[second.samples["prompt"].str.contains("edited"), "sample_index"])
    assert changed == {CHUNK - 1, CHUNK, 2 * CHUNK + 499}
    # the unchanged samples were copied whole from the first run (same scores, same outputs)
    same = second.samples[~second.samples["sample_index"].isin(changed)]
    assert same["output_text"].tolist() == first.samples.loc[same.index, "output_text"].tolist()
    assert len(second.samples) == n and (second.samples["status"] == "completed").all()


def test_a_resumed_run_keeps_its_samples_and_redoes_edited_rows(make_suite, model_server, tmp_path):
    from evalnb.store import Store

    n = CHUNK + 200
    suite = make_suite({"qa": rows(n)})
    server = model_server()
    model = Model("m", base_url=server.base_url, api="chat")
    done = evalnb.run(suite, [model], progress=False, reuse=False)
    store = Store()
    store.update_run(done.run_id, status="failed")  # as if it had died at the very end
    data = rows(n)
    data[CHUNK + 5] = {**data[CHUNK + 5], "a": "changed target"}
    write_jsonl(tmp_path / "data" / "qa.jsonl", data)
    server.reset()
    resumed = evalnb.resume(done.run_id, progress=False, store=store)
    # reuse=False: the kept samples stay, the one whose target changed is graded again; its
    # prompt did not change, so the run's own cached answer is used (no model call)
    assert server.request_count == 0
    row = resumed.samples[resumed.samples["sample_index"] == CHUNK + 5].iloc[0]
    assert row["target"] == "changed target" and row["score"] == 0.0
    assert len(resumed.samples) == n


def test_iter_items_reads_a_file_as_it_goes(tmp_path):
    from evalnb.errors import DatasetError
    from evalnb.suite import Suite
    from evalnb.suite.items import iter_items, suite_items

    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows(3000)) + "{broken\n")
    suite = Suite.from_dict({"tasks": [{"id": "t", "type": "qa", "dataset": {"path": str(path)},
                                        "prompt_template": "{{q}}", "target_template": "{{a}}",
                                        "fewshot": {"count": 2}, "grader": {"source": EXACT}}]})
    items = iter_items(suite, "t")
    first = [next(items) for _ in range(2000)]  # the broken last line is not read yet
    assert [i.index for i in first[:3]] == [0, 1, 2]
    assert first[1999].prompt.endswith(rows(3000)[1999]["q"])
    assert len(first[1999].fewshot) == 2  # "first" few-shot picks among the first rows only
    with pytest.raises(DatasetError, match="line 3001"):
        list(items)
    with pytest.raises(DatasetError, match="line 3001"):  # the list form reads everything first
        suite_items(suite, "t")
    ok = tmp_path / "ok.jsonl"
    ok.write_text("".join(json.dumps(r) + "\n" for r in rows(50)))
    suite = Suite.from_dict({"tasks": [{"id": "t", "type": "qa", "dataset": {"path": str(ok)},
                                        "prompt_template": "{{q}}", "target_template": "{{a}}",
                                        "fewshot": {"count": 3, "strategy": "random", "seed": 1},
                                        "grader": {"source": EXACT}}]})
    assert list(iter_items(suite, "t")) == suite_items(suite, "t")
