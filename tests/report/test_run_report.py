"""`evalnb report RUN_ID [--baseline RUN_ID]`: one offline HTML file for a run, used in Chromium.

Two runs of the quickstart suite against the local stand-in models (examples/notebook_models):
the baseline swaps the two models' labels, so items change score between the runs. The report
is written by the CLI, read as text (settings, metrics with intervals, paired comparisons, the
diff), then opened from disk in headless Chromium with every non-local request refused: a
filter is clicked, a page turned, a string searched, and what shows is checked against the runs.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from helpers.jupyterlab import CHROMIUM

import evalnb
from evalnb.cli import main as cli
from evalnb.providers import Model

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples"))
from notebook_models import setup_models  # noqa: E402

pytestmark = [pytest.mark.usefixtures("evalnb_home"), pytest.mark.timeout(240)]


@pytest.fixture
def runs(monkeypatch):
    for name in ("EVALNB_BASE_URL", "OPENAI_API_KEY", "EVALNB_MODELS", "EVALNB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    setup = setup_models(2)
    try:
        suite = evalnb.Suite.from_file(ROOT / "examples" / "quickstart" / "suite.yaml")
        large, small = setup.models
        swapped = [Model(small.name, base_url=small.base_url, api=small.api, label=large.label),
                   Model(large.name, base_url=large.base_url, api=large.api, label=small.label)]
        baseline = evalnb.run(suite, swapped, concurrency=8, progress=False)
        result = evalnb.run(suite, setup.models, concurrency=8, progress=False)
    finally:
        setup.close()
    return result, baseline


def test_cli_writes_one_self_contained_page(runs, tmp_path, capsys):
    result, baseline = runs
    out = tmp_path / "run.html"
    assert cli(["report", result.run_id[-8:], "--baseline", baseline.run_id, "-o", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    page = out.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?https?:""", page)  # nothing to fetch
    assert result.run_id in page and baseline.run_id in page
    metrics = result.metrics
    row = metrics[(metrics.task_id == "sentiment") & (metrics.model == "standin-small")].iloc[0]
    assert f"<td class='num'>{row['ci_low']:.3f}</td><td class='num'>{row['ci_high']:.3f}</td>" in page
    paired = result.paired_all()
    assert f"<td class='num'>{paired.iloc[0]['mean_diff']:.3f}</td>" in page
    assert "Is each difference real?" in page and "Against baseline run" in page
    diff = result.diff(baseline)
    assert f"<td class='num'>{diff.iloc[0]['mean_baseline']:.3f}</td>" in page
    assert page.count('class="evalnb-figure-svg"') == 2  # metrics and diff pictures, drawn offline
    changed = len({(t, i) for t, i in evalnb.results.diff.changed_items(result.scores, baseline.scores)})
    assert changed > 0 and f"Changed vs baseline (<span class='count'>{changed}</span>)" in page


def test_report_from_python_for_a_run_id_and_clear_errors(runs, tmp_path, capsys):
    result, _ = runs
    path = evalnb.report(result.run_id, tmp_path / "one.html")
    assert path.is_file() and "Changed vs baseline" in path.read_text(encoding="utf-8")
    assert cli(["report", "no-such-run", "-o", str(tmp_path / "x.html")]) == 1
    assert "unknown run 'no-such-run'" in capsys.readouterr().err
    with pytest.raises(TypeError, match="RunResult or a run id"):
        evalnb.report(42, tmp_path / "x.html")


@pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"), reason="no /usr/bin/chromium")
def test_filters_pages_and_search_in_chromium_offline(runs, tmp_path):
    from playwright.sync_api import expect

    from helpers.offline_browser import offline_page

    result, baseline = runs
    out = evalnb.report(result, tmp_path / "run.html", baseline=baseline)
    samples = result.samples
    n_items = samples.groupby(["task_id", "sample_index"]).ngroups
    changed = evalnb.results.diff.changed_items(result.scores, baseline.scores)
    with offline_page() as (page, refused):
        page.goto(out.as_uri())
        expect.set_options(timeout=20_000)
        items, where = page.locator("#items .item"), page.locator("#where")
        expect(items).to_have_count(20)  # one page drawn, not every item
        expect(where).to_contain_text(f"page 1 of {-(-n_items // 20)}")
        expect(items.first.locator("table.side th")).to_contain_text(
            ["", "standin-large (baseline)", "standin-large", "standin-small (baseline)", "standin-small"])

        page.locator("#next").click()
        expect(where).to_contain_text(f"page 2 of {-(-n_items // 20)} · items 21-40 of {n_items}")

        page.locator("button[data-filter='changed']").click()
        expect(where).to_contain_text(f"of {len(changed)}")
        first = items.first.locator(".ihead")
        expect(first).to_contain_text("changed vs baseline")
        task, index = re.search(r"task (\w+) · sample_index (\d+)", first.inner_text()).groups()
        assert (task, int(index)) in changed

        page.locator("button[data-filter='all']").click()
        target = samples[(samples.task_id == "arithmetic") & (samples.model == "standin-small")].iloc[7]
        needle = str(target["output_text"])
        page.locator("#search").fill(needle)
        expect(where).to_contain_text("page 1 of 1")
        hits = samples[samples.output_text.astype(str).str.lower().str.contains(needle.lower(), regex=False)]
        expect(items).to_have_count(hits.groupby(["task_id", "sample_index"]).ngroups)
        expect(items.first).to_contain_text(needle)
        expect(items.first.locator(".ihead")).to_contain_text(f"sample_index {target['sample_index']}")

        page.locator("#search").fill("")
        page.locator("#task").select_option("sentiment")
        page.locator("button[data-filter='failures']").click()
        shown = samples[(samples.task_id == "sentiment")]
        failures = {i for i, g in shown.groupby("sample_index")
                    if (g.status == "failed").any() or g.extracted_output.isna().any() or g.error.notna().any()}
        expect(where).to_contain_text(f"of {len(failures)}")
        assert not refused, refused


def test_sample_text_cannot_break_out_of_the_page(tmp_path):
    from evalnb.results.run_result import RunResult

    nasty = "</script><!--<script>alert(1)</script> & <b>bold</b>"
    samples = [{"task_id": "t", "model": m, "sample_index": 0, "epoch": 0, "status": "completed", "prompt": nasty,
                "target": "x", "output_text": nasty + m, "extracted_output": "x", "scores": {"em": 1.0}}
               for m in ("a", "b")]
    result = RunResult.from_data(samples, run={"run_id": "r1", "status": "completed",
                                               "models": [{"label": "a"}, {"label": "b"}]})
    page = evalnb.report(result, tmp_path / "r.html").read_text(encoding="utf-8")
    data = re.search(r"<script type='application/json' id='evalnb-data'>(.*?)</script>", page, re.S).group(1)
    assert "<" not in data  # no tag, comment or closing script can start inside the data
    import json

    item = json.loads(data)["items"][0]
    assert item[3] == nasty and item[5][1][1] == nasty + "b"


def test_judge_payload_and_grader_log_are_in_the_page(tmp_path, monkeypatch):
    """A judged task and a grader that prints: each sample's judge calls (request as sent, reply)
    and what its grader printed travel with the sample in the embedded data."""
    import json

    for name in ("EVALNB_BASE_URL", "OPENAI_API_KEY", "EVALNB_MODELS", "EVALNB_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    printing = ('def grade(sample, item):\n'
                '    print("comparing", sample["extracted_output"], "with", item["target"])\n'
                '    return {"scores": {"exact": float(sample["extracted_output"] == item["target"])}}\n')
    explain = {"path": str(ROOT / "examples" / "graders" / "explain.jsonl")}
    suite = evalnb.Suite.from_dict({"tasks": [
        {"id": "explain_judge", "type": "llm_judge", "dataset": explain,
         "prompt_template": "Question: {{question}}\nExplain in one or two sentences.",
         "target_template": "{{reference}}", "grader": evalnb.graders.spec("llm_judge")},
        {"id": "arith", "type": "math",
         "dataset": {"path": str(ROOT / "examples" / "quickstart" / "data" / "arithmetic.jsonl")},
         "prompt_template": 'Answer the question. End with "The answer is <number>."\nQuestion: {{question}}',
         "target_template": "{{answer}}", "output_extraction": {"type": "number"},
         "metrics": [{"id": "exact"}], "grader": {"type": "python", "contract": "sample", "source": printing}},
    ]})
    setup = setup_models(2)
    try:
        result = evalnb.run(suite, setup.models, judge_model=setup.judge, concurrency=8, progress=False,
                            max_samples=5)
    finally:
        setup.close()
    page = evalnb.report(result, tmp_path / "judged.html").read_text(encoding="utf-8")
    data = json.loads(re.search(r"id='evalnb-data'>(.*?)</script>", page, re.S).group(1))
    calls = result.judge_calls
    first = calls.iloc[0]
    item = next(i for i in data["items"] if i[0] == "explain_judge" and i[1] == int(first["sample_index"]))
    sample = item[5][data["columns"].index(first["model"])]
    judge = sample[data["sample_keys"].index("judge")]
    assert judge and judge[0]["reply"] == first["output_text"] and judge[0]["judge_model"] == first["judge_model"]
    assert judge[0]["request"] == json.loads(json.dumps(first["request"], default=str))  # the body as sent
    arith = next(i for i in data["items"] if i[0] == "arith")
    log = arith[5][0][data["sample_keys"].index("log")]
    assert log.startswith("comparing ") and " with " in log
