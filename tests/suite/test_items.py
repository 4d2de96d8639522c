"""Items: dataset rows -> the exact prompt and target a model is sent and graded on.

Everything goes through the public API (``Suite.items``) with real files in tmp_path; the
preprocessor seam (``evalnb.suite.items.suite_items(..., preprocess=fn)``) gets plain functions.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalnb.data.upload_store import upload
from evalnb.errors import DatasetError
from evalnb.suite import Suite
from evalnb.suite.items import FewshotExample, Item, suite_items

GRADE = "def grade(sample, item):\n    return 1.0\n"


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path))
    return tmp_path


# --- helpers ------------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def qa_rows(n: int) -> list[dict]:
    return [{"q": f"q{i}", "a": f"a{i}"} for i in range(n)]


def make_suite(tmp_path: Path, rows: list[dict] | None = None, **task: Any) -> Suite:
    """One task "t" over data.jsonl (prompt "{{q}}", target "{{a}}") with ``task`` fields on top.

    A field given as None is removed from the task.
    """
    if rows is not None:
        write_jsonl(tmp_path / "data.jsonl", rows)
    fields = {
        "id": "t",
        "type": "qa",
        "dataset": {"path": "data.jsonl"},
        "prompt_template": "{{q}}",
        "target_template": "{{a}}",
        "grader": {"source": GRADE},
        **task,
    }
    fields = {key: value for key, value in fields.items() if value is not None}
    return Suite.from_dict({"tasks": [fields]}, base_dir=tmp_path)


def shot_rows(item: Item) -> list[int]:
    return [example.row_index for example in item.fewshot]


# --- rendering ----------------------------------------------------------------------------


def test_prompt_and_target_are_rendered_per_row(tmp_path):
    rows = [{"q": "2+2", "a": 4}, {"q": "capital of France", "a": "Paris"}]
    suite = make_suite(tmp_path, rows, prompt_template="Q: {{ q }}\nA:", target_template="{{a}}")
    items = suite.items("t")
    assert items == [
        Item(index=0, row=rows[0], prompt="Q: 2+2\nA:", target="4", question="Q: 2+2\nA:"),
        Item(
            index=1,
            row=rows[1],
            prompt="Q: capital of France\nA:",
            target="Paris",
            question="Q: capital of France\nA:",
        ),
    ]
    assert items[0].choices is None and items[0].fewshot == ()


def test_csv_values_render_as_strings(tmp_path):
    (tmp_path / "data.csv").write_text("q,a\nhow many,3\n\"a, b\",\"x\"\"y\"\n", encoding="utf-8")
    suite = make_suite(tmp_path, dataset={"path": "data.csv"}, prompt_template="[{{q}}]")
    items = suite.items("t")
    assert [(i.prompt, i.target, i.row) for i in items] == [
        ("[how many]", "3", {"q": "how many", "a": "3"}),
        ('[a, b]', 'x"y', {"q": "a, b", "a": 'x"y'}),
    ]


def test_nested_paths_whole_row_and_missing_fields(tmp_path):
    rows = [{"meta": {"src": "wiki"}, "answers": ["x", "y"], "flag": True, "n": None}]
    suite = make_suite(
        tmp_path,
        rows,
        prompt_template="{{meta.src}}|{{answers.1}}|{{flag}}|{{n}}|{{nope}}|{{meta.nope}}",
        target_template="{{row}}",
    )
    (item,) = suite.items("t")
    assert item.prompt == "wiki|y|true|||"
    assert item.target == json.dumps(rows[0], ensure_ascii=False)


def test_task_choices_fill_choices_and_choice_list_and_beat_the_row(tmp_path):
    rows = [{"q": "Pick", "choices": ["row-only"], "a": "B"}]
    suite = make_suite(
        tmp_path,
        rows,
        choices=["Paris", "Rome", "Zürich"],
        prompt_template="{{q}}\n{{choice_list}}\n{{choices}}\n{{choices.1}}",
    )
    (item,) = suite.items("t")
    assert item.prompt == 'Pick\nParis\nRome\nZürich\n["Paris", "Rome", "Zürich"]\nRome'
    assert item.choices == ["Paris", "Rome", "Zürich"]


def test_without_task_choices_the_placeholders_read_the_row(tmp_path):
    rows = [{"q": "Pick", "choices": ["x", "y"], "choice_list": "x or y"}]
    suite = make_suite(tmp_path, rows, prompt_template="{{choices}}|{{choice_list}}")
    (item,) = suite.items("t")
    assert item.prompt == '["x", "y"]|x or y'
    assert item.choices is None


def test_task_with_empty_choices_list_still_overrides_the_row(tmp_path):
    suite = make_suite(tmp_path, [{"choices": ["x"]}], choices=[], prompt_template="<{{choice_list}}>{{choices}}")
    (item,) = suite.items("t")
    assert item.prompt == "<>[]"
    assert item.choices == []


def test_row_values_are_not_rendered_again(tmp_path):
    rows = [{"q": "say {{a}}", "a": "{{q}}"}, {"q": "x", "a": "y"}]
    suite = make_suite(tmp_path, rows, num_fewshot=1, fewshot={"example_template": "{{prompt}}={{target}}"})
    assert [item.prompt for item in suite.items("t")] == ["x=y\n\nsay {{a}}", "say {{a}}={{q}}\n\nx"]


def test_task_without_target_template_has_empty_target(tmp_path):
    suite = make_suite(tmp_path, qa_rows(2), target_template=None)
    assert [item.target for item in suite.items("t")] == ["", ""]


def test_manifest_file_resolves_dataset_from_its_own_folder(tmp_path, monkeypatch):
    folder = tmp_path / "suite"
    write_jsonl(folder / "data" / "qa.jsonl", [{"q": "hi", "a": "yo"}])
    manifest = {
        "tasks": [
            {
                "id": "t",
                "type": "qa",
                "dataset": {"path": "data/qa.jsonl"},
                "prompt_template": "{{q}}",
                "target_template": "{{a}}",
                "grader": {"source": GRADE},
            }
        ]
    }
    (folder / "suite.json").write_text(json.dumps(manifest), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # not the manifest's folder
    (item,) = Suite.from_file(folder / "suite.json").items("t")
    assert (item.prompt, item.target) == ("hi", "yo")


def test_task_dataset_from_the_file_store(tmp_path):
    file_id = upload(write_jsonl(tmp_path / "upload" / "qa.jsonl", [{"q": "stored", "a": "yes"}]))
    suite = make_suite(tmp_path, dataset={"file_id": file_id})
    (item,) = suite.items("t")
    assert (item.prompt, item.target) == ("stored", "yes")


def test_unknown_task_id_is_a_key_error_listing_the_tasks(tmp_path):
    suite = make_suite(tmp_path, qa_rows(1))
    with pytest.raises(KeyError, match="'nope'.*its tasks are: t"):
        suite.items("nope")


# --- few-shot: own rows -------------------------------------------------------------------


def test_first_strategy_takes_the_first_rows_skipping_the_evaluated_one(tmp_path):
    suite = make_suite(tmp_path, qa_rows(5), fewshot={"count": 2})
    items = suite.items("t")
    assert [shot_rows(item) for item in items] == [[1, 2], [0, 2], [0, 1], [0, 1], [0, 1]]
    # examples joined with the separator, then the separator, then the rendered prompt
    assert items[0].prompt == "q1\na1\n\nq2\na2\n\nq0"
    assert items[1].prompt == "q0\na0\n\nq2\na2\n\nq1"
    assert items[4].prompt == "q0\na0\n\nq1\na1\n\nq4"
    assert items[4].question == "q4"
    assert items[4].target == "a4"
    assert items[0].fewshot[0] == FewshotExample(row_index=1, prompt="q1", target="a1", text="q1\na1")


def test_identical_rows_are_examples_for_each_other(tmp_path):
    same = {"q": "same", "a": "x"}
    suite = make_suite(tmp_path, [same, dict(same)], fewshot={"count": 1})
    items = suite.items("t")
    assert [shot_rows(item) for item in items] == [[1], [0]]
    assert [item.prompt for item in items] == ["same\nx\n\nsame", "same\nx\n\nsame"]


@pytest.mark.parametrize("strategy", ["first", "random"])
def test_fewer_rows_than_count_uses_every_other_row(tmp_path, strategy):
    suite = make_suite(tmp_path, qa_rows(3), fewshot={"count": 5, "strategy": strategy})
    items = suite.items("t")
    assert [sorted(shot_rows(item)) for item in items] == [[1, 2], [0, 2], [0, 1]]
    if strategy == "first":
        assert items[2].prompt == "q0\na0\n\nq1\na1\n\nq2"


@pytest.mark.parametrize("strategy", ["first", "random"])
def test_a_lone_row_has_no_examples_and_no_separator(tmp_path, strategy):
    suite = make_suite(tmp_path, qa_rows(1), fewshot={"count": 3, "strategy": strategy, "separator": "##"})
    (item,) = suite.items("t")
    assert (item.prompt, item.fewshot) == ("q0", ())


def test_count_equal_to_the_other_rows_uses_them_all(tmp_path):
    suite = make_suite(tmp_path, qa_rows(4), fewshot={"count": 3})
    assert [shot_rows(item) for item in suite.items("t")] == [[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]]


def test_count_zero_is_the_prompt_alone(tmp_path):
    suite = make_suite(
        tmp_path, qa_rows(3), fewshot={"count": 0, "separator": "##", "example_template": "E"}
    )
    assert suite.task("t").effective_fewshot is None
    items = suite.items("t")
    assert [(item.prompt, item.fewshot) for item in items] == [("q0", ()), ("q1", ()), ("q2", ())]


def test_num_fewshot_shorthand_equals_fewshot_count(tmp_path):
    write_jsonl(tmp_path / "data.jsonl", qa_rows(4))
    short = make_suite(tmp_path, num_fewshot=2).items("t")
    expanded = make_suite(tmp_path, fewshot={"count": 2}).items("t")
    both = make_suite(tmp_path, num_fewshot=2, fewshot={"count": 2, "separator": "\n\n"}).items("t")
    assert short == expanded == both
    assert short[3].prompt == "q0\na0\n\nq1\na1\n\nq3"


def test_num_fewshot_fills_an_expanded_fewshot_without_count(tmp_path):
    suite = make_suite(tmp_path, qa_rows(3), num_fewshot=1, fewshot={"separator": " | "})
    assert [item.prompt for item in suite.items("t")] == ["q1\na1 | q0", "q0\na0 | q1", "q0\na0 | q2"]


def test_custom_example_template_and_separator(tmp_path):
    suite = make_suite(
        tmp_path,
        qa_rows(3),
        prompt_template="Question: {{q}}",
        fewshot={
            "count": 2,
            "example_template": "<{{prompt}} => {{target}}>",
            "separator": "\n---\n",
        },
    )
    items = suite.items("t")
    assert items[0].prompt == "<Question: q1 => a1>\n---\n<Question: q2 => a2>\n---\nQuestion: q0"
    assert items[0].fewshot[1].text == "<Question: q2 => a2>"


def test_example_template_sees_only_prompt_and_target(tmp_path):
    suite = make_suite(
        tmp_path, qa_rows(2), fewshot={"count": 1, "example_template": "{{prompt}}/{{target}}/{{q}}/"}
    )
    assert suite.items("t")[0].prompt == "q1/a1//\n\nq0"


def test_fewshot_templates_default_to_the_tasks(tmp_path):
    suite = make_suite(tmp_path, qa_rows(2), prompt_template="Q: {{q}}", target_template="A: {{a}}", num_fewshot=1)
    item = suite.items("t")[0]
    assert item.fewshot[0] == FewshotExample(1, "Q: q1", "A: a1", "Q: q1\nA: a1")
    assert item.prompt == "Q: q1\nA: a1\n\nQ: q0"


def test_fewshot_templates_can_be_overridden(tmp_path):
    suite = make_suite(
        tmp_path,
        qa_rows(2),
        prompt_template="Q: {{q}}",
        target_template="{{a}}",
        fewshot={"count": 1, "prompt_template": "Example {{q}}", "target_template": "Solution {{a}}"},
    )
    items = suite.items("t")
    assert items[0].prompt == "Example q1\nSolution a1\n\nQ: q0"
    assert (items[0].question, items[0].target) == ("Q: q0", "a0")  # the evaluated row is untouched


def test_fewshot_without_any_target_template_has_empty_example_targets(tmp_path):
    suite = make_suite(tmp_path, qa_rows(2), target_template=None, num_fewshot=1)
    item = suite.items("t")[0]
    assert (item.prompt, item.fewshot[0].target) == ("q1\n\n\nq0", "")


def test_fewshot_target_template_works_when_the_task_has_none(tmp_path):
    suite = make_suite(tmp_path, qa_rows(2), target_template=None, fewshot={"count": 1, "target_template": "{{a}}"})
    item = suite.items("t")[0]
    assert (item.prompt, item.target) == ("q1\na1\n\nq0", "")


def test_fewshot_templates_see_the_task_choices(tmp_path):
    suite = make_suite(
        tmp_path, qa_rows(2), choices=["A", "B"], prompt_template="{{q}} {{choice_list}}", num_fewshot=1
    )
    assert suite.items("t")[1].prompt == "q0 A\nB\na0\n\nq1 A\nB"


# --- few-shot: random ---------------------------------------------------------------------


def random_suite(tmp_path: Path, seed: int, n: int = 30, count: int = 3, **extra: Any) -> Suite:
    return make_suite(tmp_path, qa_rows(n), fewshot={"count": count, "strategy": "random", "seed": seed, **extra})


def test_random_is_reproducible_and_excludes_the_evaluated_row(tmp_path):
    first = random_suite(tmp_path, seed=7).items("t")
    again = random_suite(tmp_path, seed=7).items("t")
    assert first == again
    for item in first:
        picked = shot_rows(item)
        assert len(picked) == 3 and len(set(picked)) == 3
        assert item.index not in picked
        assert all(0 <= j < 30 for j in picked)
    # each row gets its own sample, not one shared set
    assert len({tuple(shot_rows(item)) for item in first}) > 1
    assert first[0].prompt == "\n\n".join(f"q{j}\na{j}" for j in shot_rows(first[0])) + "\n\nq0"


def test_random_differs_across_seeds(tmp_path):
    seed0 = [shot_rows(item) for item in random_suite(tmp_path, seed=0).items("t")]
    seed1 = [shot_rows(item) for item in random_suite(tmp_path, seed=1).items("t")]
    assert seed0 != seed1


def test_random_depends_on_seed_and_row_index_not_row_content(tmp_path):
    write_jsonl(tmp_path / "data.jsonl", qa_rows(12))
    before = [shot_rows(item) for item in random_suite(tmp_path, seed=3, n=12).items("t")]
    other = tmp_path / "other"
    write_jsonl(other / "data.jsonl", [{"q": f"different {i}", "a": i * i} for i in range(12)])
    after = [shot_rows(item) for item in random_suite(other, seed=3, n=12).items("t")]
    assert before == after


def test_random_default_seed_is_zero(tmp_path):
    implicit = make_suite(tmp_path, qa_rows(20), fewshot={"count": 2, "strategy": "random"}).items("t")
    explicit = random_suite(tmp_path, seed=0, n=20, count=2).items("t")
    assert implicit == explicit


def test_random_under_limit_draws_examples_from_all_rows(tmp_path):
    full = random_suite(tmp_path, seed=5, n=20, count=5).items("t")
    limited = random_suite(tmp_path, seed=5, n=20, count=5).items("t", limit=2)
    assert limited == full[:2]
    assert any(j >= 2 for item in limited for j in shot_rows(item))


# --- few-shot: a separate dataset ---------------------------------------------------------


def test_separate_fewshot_dataset_from_a_local_file(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"q": "t0", "a": "A0"}, {"q": "t1", "a": "A1"}, {"q": "t2", "a": "A2"}])
    suite = make_suite(tmp_path, qa_rows(2), fewshot={"count": 2, "dataset": {"path": "train.jsonl"}})
    items = suite.items("t")
    # no row is excluded: the evaluated rows are not in this pool
    assert [shot_rows(item) for item in items] == [[0, 1], [0, 1]]
    assert items[1].prompt == "t0\nA0\n\nt1\nA1\n\nq1"


def test_separate_fewshot_dataset_row_equal_to_the_evaluated_row_is_kept(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"q": "q0", "a": "a0"}])
    suite = make_suite(tmp_path, qa_rows(1), fewshot={"count": 1, "dataset": {"path": "train.jsonl"}})
    assert suite.items("t")[0].prompt == "q0\na0\n\nq0"


def test_separate_fewshot_dataset_from_the_file_store(tmp_path):
    train = tmp_path / "upload" / "train.csv"
    train.parent.mkdir()
    train.write_text("q,a\nc0,C0\nc1,C1\n", encoding="utf-8")
    file_id = upload(train)
    suite = make_suite(
        tmp_path,
        qa_rows(1),
        fewshot={"count": 5, "dataset": {"file_id": file_id}, "separator": " ; "},
    )
    (item,) = suite.items("t")
    assert item.prompt == "c0\nC0 ; c1\nC1 ; q0"


def test_separate_fewshot_dataset_with_random_strategy(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"q": f"t{i}", "a": f"A{i}"} for i in range(10)])
    fewshot = {"count": 3, "dataset": {"path": "train.jsonl"}, "strategy": "random", "seed": 1}
    items = make_suite(tmp_path, qa_rows(4), fewshot=fewshot).items("t")
    for item in items:
        picked = shot_rows(item)
        assert len(set(picked)) == 3 and all(0 <= j < 10 for j in picked)
        assert item.prompt == "\n\n".join(f"t{j}\nA{j}" for j in picked) + f"\n\nq{item.index}"
    assert items == make_suite(tmp_path, fewshot=fewshot).items("t")


def test_separate_fewshot_dataset_is_not_loaded_when_count_is_zero(tmp_path):
    suite = make_suite(tmp_path, qa_rows(1), fewshot={"count": 0, "dataset": {"path": "missing.jsonl"}})
    assert suite.items("t")[0].prompt == "q0"


# --- limit --------------------------------------------------------------------------------


@pytest.mark.parametrize(("limit", "expected"), [(None, 4), (0, 0), (1, 1), (3, 3), (4, 4), (10, 4)])
def test_limit_caps_the_number_of_items(tmp_path, limit, expected):
    items = make_suite(tmp_path, qa_rows(4)).items("t", limit=limit)
    assert [item.index for item in items] == list(range(expected))


@pytest.mark.parametrize("strategy", ["first", "random"])
@pytest.mark.parametrize("limit", [0, 1, 2, 5])
def test_limited_items_equal_the_first_unlimited_items(tmp_path, strategy, limit):
    suite = make_suite(tmp_path, qa_rows(6), fewshot={"count": 3, "strategy": strategy, "seed": 2})
    assert suite.items("t", limit=limit) == suite.items("t")[:limit]


def test_limit_reads_no_further_than_needed(tmp_path):
    path = write_jsonl(tmp_path / "data.jsonl", qa_rows(3))
    with path.open("a", encoding="utf-8") as f:
        f.write("not json\n")
    suite = make_suite(tmp_path, num_fewshot=1)
    assert [item.prompt for item in suite.items("t", limit=1)] == ["q1\na1\n\nq0"]
    with pytest.raises(DatasetError, match="line 4"):
        suite.items("t")


@pytest.mark.parametrize("limit", [-1, 1.5, "2", True])
def test_a_bad_limit_is_refused(tmp_path, limit):
    suite = make_suite(tmp_path, qa_rows(3))
    with pytest.raises(ValueError, match="task 't': limit must be"):
        suite.items("t", limit=limit)


@pytest.mark.parametrize("limit", [-1, True])
def test_a_bad_limit_is_refused_even_when_every_row_is_read(tmp_path, limit):
    suite = make_suite(tmp_path, qa_rows(3), fewshot={"count": 1, "strategy": "random"})
    with pytest.raises(ValueError, match="task 't': limit must be"):
        suite_items(suite, "t", limit=limit, preprocess=lambda task, rows: rows)


# --- the grader's item --------------------------------------------------------------------


def test_as_grader_item_has_row_fields_and_rendered_fields_on_top(tmp_path):
    rows = [{"q": "q0", "a": "a0", "prompt": "row prompt"}, {"q": "q1", "a": "a1", "target": "row target", "x": 1}]
    suite = make_suite(tmp_path, rows, choices=["yes", "no"], num_fewshot=1)
    item = suite.items("t")[1]
    assert item.as_grader_item() == {
        "q": "q1",
        "a": "a1",
        "x": 1,
        "target": "a1",
        "prompt": "q0\na0\n\nq1",
        "choices": ["yes", "no"],
        "sample_index": 1,
        "row": {"q": "q1", "a": "a1", "target": "row target", "x": 1},
    }


def test_as_grader_item_keeps_the_rows_choices_when_the_task_has_none(tmp_path):
    rows = [{"q": "q0", "a": "a0", "choices": ["r1", "r2"]}, {"q": "q1", "a": "a1"}]
    items = make_suite(tmp_path, rows).items("t")
    assert items[0].as_grader_item()["choices"] == ["r1", "r2"]
    assert items[1].as_grader_item()["choices"] is None
    assert "choices" in items[1].as_grader_item()


def test_as_grader_item_does_not_change_the_item(tmp_path):
    (item,) = make_suite(tmp_path, [{"q": "q0", "a": "a0"}]).items("t")
    grader_item = item.as_grader_item()
    grader_item["q"] = "changed"
    assert item.row == {"q": "q0", "a": "a0"}


# --- dataset errors -----------------------------------------------------------------------


def test_missing_dataset_file_names_the_task_and_the_file(tmp_path):
    suite = make_suite(tmp_path, dataset={"path": "absent.jsonl"})
    with pytest.raises(DatasetError, match=r"task 't'.*dataset file not found.*absent\.jsonl"):
        suite.items("t")


def test_bad_jsonl_line_names_the_task_file_and_line(tmp_path):
    (tmp_path / "data.jsonl").write_text('{"q": "ok"}\n\n{"q": broken}\n', encoding="utf-8")
    suite = make_suite(tmp_path)
    with pytest.raises(DatasetError) as info:
        suite.items("t")
    message = str(info.value)
    assert message.startswith("task 't': data.jsonl line 3: invalid JSON")


def test_non_object_jsonl_line_is_an_error(tmp_path):
    (tmp_path / "data.jsonl").write_text('{"q": "ok"}\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"^task 't': data\.jsonl line 2: not a JSON object \(found list\)$"):
        make_suite(tmp_path).items("t")


def test_bad_line_in_the_fewshot_dataset_names_the_task_and_that_file(tmp_path):
    (tmp_path / "shots.jsonl").write_text('{"q": "s"}\n"just a string"\n', encoding="utf-8")
    suite = make_suite(tmp_path, qa_rows(2), fewshot={"count": 1, "dataset": {"path": "shots.jsonl"}})
    with pytest.raises(DatasetError, match=r"^task 't': shots\.jsonl line 2: not a JSON object"):
        suite.items("t")


def test_missing_fewshot_file_id_names_the_task(tmp_path):
    suite = make_suite(tmp_path, qa_rows(2), fewshot={"count": 1, "dataset": {"file_id": "file-nothere"}})
    with pytest.raises(DatasetError, match=r"task 't'.*unknown file id 'file-nothere'"):
        suite.items("t")


# --- the preprocessor seam ----------------------------------------------------------------


def test_preprocess_dropping_rows_applies_to_items_and_fewshot(tmp_path):
    rows = [{"q": f"q{i}", "a": f"a{i}", "keep": i % 2 == 0} for i in range(6)]
    suite = make_suite(tmp_path, rows, num_fewshot=2)
    calls = []

    def keep_even(task, batch):
        calls.append((task.id, len(batch)))
        return [row for row in batch if row["keep"]]

    items = suite_items(suite, "t", preprocess=keep_even)
    assert calls == [("t", 6)]
    assert [(item.index, item.row["q"]) for item in items] == [(0, "q0"), (1, "q2"), (2, "q4")]
    # few-shot positions are positions in the preprocessed rows; dropped rows never appear
    assert [shot_rows(item) for item in items] == [[1, 2], [0, 2], [0, 1]]
    assert items[0].prompt == "q2\na2\n\nq4\na4\n\nq0"


def test_preprocess_duplicating_rows_makes_copies_usable_as_examples(tmp_path):
    suite = make_suite(tmp_path, qa_rows(2), num_fewshot=1)

    def twice(task, batch):
        return [row for row in batch for _ in range(2)]  # the very same dict twice

    items = suite_items(suite, "t", preprocess=twice)
    assert [item.row["q"] for item in items] == ["q0", "q0", "q1", "q1"]
    assert [shot_rows(item) for item in items] == [[1], [0], [0], [0]]
    assert [item.prompt for item in items] == ["q0\na0\n\nq0", "q0\na0\n\nq0", "q0\na0\n\nq1", "q0\na0\n\nq1"]


def test_preprocess_can_add_fields_the_templates_use(tmp_path):
    suite = make_suite(tmp_path, qa_rows(2), prompt_template="{{loud}}", num_fewshot=1)

    def shout(task, batch):
        return [{**row, "loud": row["q"].upper()} for row in batch]

    items = suite_items(suite, "t", preprocess=shout)
    assert [item.prompt for item in items] == ["Q1\na1\n\nQ0", "Q0\na0\n\nQ1"]
    assert items[0].as_grader_item()["loud"] == "Q0"


def test_preprocess_also_runs_on_a_separate_fewshot_dataset(tmp_path):
    write_jsonl(tmp_path / "train.jsonl", [{"q": "t0", "a": "A0", "keep": False}, {"q": "t1", "a": "A1", "keep": True}])
    rows = [{"q": "q0", "a": "a0", "keep": True}, {"q": "q1", "a": "a1", "keep": False}]
    suite = make_suite(tmp_path, rows, fewshot={"count": 2, "dataset": {"path": "train.jsonl"}})
    seen = []

    def keep_marked(task, batch):
        seen.append([row["q"] for row in batch])
        return [row for row in batch if row["keep"]]

    items = suite_items(suite, "t", preprocess=keep_marked)
    assert seen == [["q0", "q1"], ["t0", "t1"]]
    assert [item.prompt for item in items] == ["t1\nA1\n\nq0"]


def test_preprocess_runs_before_limit(tmp_path):
    rows = [{"q": f"q{i}", "a": f"a{i}", "keep": i % 2 == 0} for i in range(10)]
    suite = make_suite(tmp_path, rows)

    def keep_even(task, batch):
        return [row for row in batch if row["keep"]]

    items = suite_items(suite, "t", limit=3, preprocess=keep_even)
    assert [item.row["q"] for item in items] == ["q0", "q2", "q4"]


def test_preprocess_before_limit_with_first_fewshot(tmp_path):
    rows = [{"q": f"q{i}", "a": f"a{i}", "keep": i >= 3} for i in range(8)]
    suite = make_suite(tmp_path, rows, num_fewshot=2)

    def drop_first_three(task, batch):
        return [row for row in batch if row["keep"]]

    limited = suite_items(suite, "t", limit=2, preprocess=drop_first_three)
    assert limited == suite_items(suite, "t", preprocess=drop_first_three)[:2]
    assert limited[0].prompt == "q4\na4\n\nq5\na5\n\nq3"


def test_suite_items_without_preprocess_matches_suite_items_method(tmp_path):
    suite = make_suite(tmp_path, qa_rows(3), num_fewshot=1)
    assert suite_items(suite, "t") == suite.items("t")
