"""An imported lm-eval task runs the same from a manifest file and from the command line.

`evalnb import-lm-eval ... -o arc.yaml` then `Suite.from_file` (and `from_dict(to_dict(s))`)
must run exactly like the suite `Suite.from_lm_eval` returns: the written grader's default
``metric_id`` is not read back as a name the task set (it is not among acc/acc_norm, and the run
would be refused). And `evalnb run --model NAME@URL,api=completions` scores a log-likelihood task
from the command line, as `evalnb.Model(api="completions")` does from Python. All against a real
`LocalModelServer` that echoes log-probabilities.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from helpers.lm_eval_data import DATASETS  # noqa: E402
from helpers.lm_eval_kit import mirror  # noqa: E402

import evalnb  # noqa: E402
from evalnb import Suite  # noqa: E402
from evalnb.cli import main  # noqa: E402
from evalnb.providers import Model  # noqa: E402
from evalnb.testing import LocalModelServer  # noqa: E402

pytestmark = pytest.mark.usefixtures("evalnb_home")

COMPARED = ["task_id", "model", "sample_index", "status", "prompt", "target", "output_text", "extracted_output", "acc", "acc_norm"]


def sharp(before: str, token: str) -> float:
    return -(len(token) - 0.75 * token.count("e")) - 0.001 * len(before)


@pytest.fixture
def arc(tmp_path: Path, capsys: pytest.CaptureFixture) -> tuple[Suite, Path]:
    """arc_easy imported directly, and the manifest file the CLI writes for it."""
    path, configs = DATASETS["arc_easy"]
    folder = mirror(tmp_path / "hf", path, configs)
    out = tmp_path / "arc.yaml"
    assert main(["import-lm-eval", "arc_easy", "--num-fewshot", "0", "--dataset-path", f"{path}={folder}",
                 "-o", str(out)]) == 0
    capsys.readouterr()
    return Suite.from_lm_eval("arc_easy", num_fewshot=0, dataset_paths={path: str(folder)}), out


def _run(suite: Suite, base_url: str):
    return evalnb.run(suite, [Model("m", base_url=base_url, api="completions")], reuse=False, progress=False)


def _frame(result):
    return result.samples.sort_values(["task_id", "sample_index"])[COMPARED].reset_index(drop=True).astype(str)


def test_an_imported_task_written_to_a_file_and_read_back_runs_like_the_import(arc) -> None:
    direct, out = arc
    from_file = Suite.from_file(out)
    round_trip = Suite.from_dict(direct.to_dict())
    assert from_file.validate() == [] and round_trip.validate() == []
    with LocalModelServer(token_logprobs=sharp) as server:
        want = _run(direct, server.base_url)
        got = [_run(s, server.base_url) for s in (from_file, round_trip)]
    assert want.status == "completed" and len(want.samples) == len(direct.items("arc_easy")) > 0
    assert set(want.metrics.metric) == {"acc", "acc_norm"}
    for result in got:
        assert result.status == "completed"
        assert _frame(result).equals(_frame(want))
        assert result.metrics.drop(columns=["error"]).equals(want.metrics.drop(columns=["error"]))


def test_a_written_default_metric_id_beside_other_metrics_is_not_a_problem_after_a_round_trip() -> None:
    # not lm-eval only: any grader returning {"scores": ...} under declared metrics, once written out
    source = "def grade(sample):\n    return {'scores': {'acc': 1.0}}\n"
    suite = Suite.from_dict({"tasks": [{
        "id": "t", "dataset": {"rows": [{"q": "a"}]}, "prompt_template": "{{q}}",
        "metrics": [{"id": "acc"}], "grader": {"type": "python", "source": source}}]})
    assert suite.to_dict()["tasks"][0]["grader"]["metric_id"] == "score"
    assert Suite.from_dict(suite.to_dict()).validate() == suite.validate() == []


def test_the_cli_runs_an_imported_loglikelihood_task_with_api_completions(arc, capsys) -> None:
    direct, out = arc
    with LocalModelServer(token_logprobs=sharp) as server:
        want = _run(direct, server.base_url).metrics.set_index("metric")["mean"]
        for flags in (["--model", f"m@{server.base_url},api=completions"],
                      ["--model", f"m@{server.base_url}", "--api", "completions"]):
            server.reset()
            code = main(["run", str(out), *flags, "--no-reuse"])
            printed, err = capsys.readouterr()
            assert code == 0, err
            assert all(r.path == "/v1/completions" for r in server.requests) and server.requests
            for metric in ("acc", "acc_norm"):
                line = [ln for ln in printed.splitlines() if ln.split()[:3] == ["arc_easy", "m", metric]]
                assert len(line) == 1 and "task model metric n n_failed n_unscored mean" in " ".join(printed.split()), printed
                assert float(line[0].split()[6]) == pytest.approx(want[metric], abs=5e-4)
