"""Preprocessors in the sandbox: both contracts, every accepted name and return shape, failures."""

from __future__ import annotations

import asyncio
import os
import time
from types import SimpleNamespace

import pytest

from evalnb.errors import PreprocessError, SandboxError
from evalnb.sandbox import SandboxPool, arun_preprocessor, preprocess, run_preprocessor
from evalnb.sandbox.preprocessing import BATCH_FUNCTIONS, ROW_FUNCTIONS

ROWS = [{"q": f"question {i}", "a": i} for i in range(5)]


@pytest.fixture(scope="module")
def pool():
    with SandboxPool(2) as p:
        yield p


def run(pool, source: str, rows=ROWS, **spec):
    return run_preprocessor({"type": "python", "source": source, **spec}, rows, task_id="qa", pool=pool)


@pytest.mark.parametrize("name", ROW_FUNCTIONS)
def test_row_contract_accepts_each_name(pool, name):
    source = f"def {name}(row):\n    return {{**row, 'q': row['q'].upper(), 'via': '{name}'}}\n"
    out = run(pool, source, contract="row")
    assert out == [{"q": f"QUESTION {i}", "a": i, "via": name} for i in range(5)]


def test_contract_defaults_to_row_and_names_resolve_in_order(pool):
    source = "def process_doc(row): return {'via': 'process_doc'}\ndef transform(row): return {'via': 'transform'}\n"
    assert run(pool, source)[0] == {"via": "transform"}
    source += "def transform_row(row): return {'via': 'transform_row'}\n"
    assert run(pool, source)[0] == {"via": "transform_row"}
    source = "def transform_batch(rows): return [{'via': 'transform_batch'}]\ndef process_docs(rows): return [{'via': 'process_docs'}]\n"
    assert run(pool, source, contract="batch") == [{"via": "transform_batch"}]


@pytest.mark.parametrize("name", BATCH_FUNCTIONS)
def test_batch_contract_can_filter_duplicate_and_merge(pool, name):
    source = f"""
def {name}(rows):
    kept = [r for r in rows if r["a"] % 2 == 0]            # filter
    doubled = [dict(r, copy=k) for r in kept for k in (0, 1)]   # duplicate
    return doubled + [{{"merged": sum(r["a"] for r in rows)}}]  # merge
"""
    out = run(pool, source, contract="batch")
    assert out == [dict(ROWS[i], copy=k) for i in (0, 2, 4) for k in (0, 1)] + [{"merged": 10}]


def test_row_return_shapes_dict_list_none(pool):
    source = """
def transform(row):
    a = row["a"]
    if a == 0: return None                      # drop
    if a == 1: return [row, dict(row, dup=True)] # duplicate
    if a == 2: return []                        # drop, as a list
    return {"a": a}
"""
    assert run(pool, source) == [ROWS[1], dict(ROWS[1], dup=True), {"a": 3}, {"a": 4}]


def test_batch_may_return_a_single_dict_or_none(pool):
    assert run(pool, "def transform_batch(rows): return {'n': len(rows)}", contract="batch") == [{"n": 5}]
    assert run(pool, "def transform_batch(rows): return None", contract="batch") == []


@pytest.mark.parametrize(
    "returned, expected",
    [("'text'", "returned a string ('text') for row 3"), ("42", "returned an int (42)"),
     ("[{'a': 1}, 3]", "returned a list for row 3 whose item 1 is an int (3)"),
     ("(1, 2)", "whose item 0 is an int"), ("{1, 2}", "not JSON")],
)  # fmt: skip
def test_wrong_return_types_name_task_and_row(pool, returned, expected):
    source = f"def transform(row):\n    return {returned} if row['a'] == 3 else row\n"
    with pytest.raises(PreprocessError) as err:
        run(pool, source)
    message = str(err.value)
    assert message.startswith("task 'qa': the preprocessor")
    assert "row 3" in message and expected in message


def test_raising_row_names_task_row_exception_and_line(pool):
    source = "def transform(row):\n    x = 1\n    if row['a'] == 3:\n        raise ValueError('no answer field')\n    return row\n"
    with pytest.raises(PreprocessError) as err:
        run(pool, source)
    assert str(err.value) == "task 'qa': the preprocessor failed on row 3: ValueError: no answer field (line 4)"


def test_failure_index_is_right_across_workers_and_frames(pool):
    rows = [{"a": i} for i in range(3000)]
    source = "def transform(row):\n    if row['a'] == 2345:\n        raise KeyError('x')\n    return row\n"
    with pytest.raises(PreprocessError, match="on row 2345: KeyError: 'x' \\(line 3\\)"):
        run(pool, source, rows=rows)
    out = run(pool, "def transform(row):\n    return {'b': row['a'] * 2}\n", rows=rows)
    assert out == [{"b": i * 2} for i in range(3000)]


def test_batch_failure_names_the_task_without_a_row(pool):
    with pytest.raises(PreprocessError) as err:
        run(pool, "def process_docs(rows):\n    return rows[100]\n", contract="batch")
    assert str(err.value) == "task 'qa': the preprocessor failed: IndexError: list index out of range (line 2)"


def test_timeout_names_the_row(pool):
    source = "def transform(row):\n    while row['a'] == 1:\n        pass\n    return row\n"
    started = time.monotonic()
    with pytest.raises(PreprocessError, match="failed on row 1: transform timed out after 1 s"):
        run(pool, source, timeout_seconds=1)
    assert time.monotonic() - started < 4


def test_crash_names_the_row(pool):
    with pytest.raises(PreprocessError, match="on row 2: the sandbox worker exited with code 7"):
        run(pool, "import os\ndef transform(row):\n    if row['a'] == 2:\n        os._exit(7)\n    return row\n")


def test_no_accepted_function_lists_the_names(pool):
    with pytest.raises(PreprocessError) as err:
        run(pool, "def transform_rows(row): return row\n")
    assert "task 'qa'" in str(err.value) and "transform_row, transform, process_doc" in str(err.value)
    with pytest.raises(PreprocessError, match="transform_batch, process_docs"):
        run(pool, "def transform(row): return row\n", contract="batch")


def test_syntax_error_reports_the_line(pool):
    with pytest.raises(PreprocessError) as err:
        run(pool, "def transform(row):\n    return row\n\ndef broken(:\n    pass\n")
    assert "task 'qa'" in str(err.value) and "SyntaxError" in str(err.value) and "(line 4)" in str(err.value)


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"type": "js", "source": "x"}, "type must be 'python'"),
        ({"contract": "rows", "source": "x"}, "contract must be 'row' or 'batch'"),
        ({"timeout_seconds": 0, "source": "x"}, "timeout_seconds must be 1-600"),
        ({"timeout_seconds": 601, "source": "x"}, "timeout_seconds must be 1-600"),
        ({}, "needs source or file_id"),
    ],
)
def test_bad_specs(pool, spec, message):
    with pytest.raises(PreprocessError, match=message):
        run_preprocessor(spec, ROWS, task_id="qa", pool=pool)


def test_file_id_preprocessor(pool, tmp_path, monkeypatch):
    monkeypatch.setenv("EVALNB_HOME", str(tmp_path / "home"))
    from evalnb.data import upload_store
    path = tmp_path / "prep.py"
    path.write_text("def process_doc(doc):\n    return {'text': doc['q'][::-1]}\n")
    spec = SimpleNamespace(type="python", contract=None, source=None, file_id=upload_store.upload(path), timeout_seconds=None)
    assert run_preprocessor(spec, ROWS[:2], task_id="qa", pool=pool) == [{"text": "0 noitseuq"}, {"text": "1 noitseuq"}]


def test_empty_rows_and_missing_spec(pool):
    assert run(pool, "def transform(row): return row") == run(pool, "def transform(row): return row", rows=ROWS)
    assert run(pool, "def transform(row): raise ValueError", rows=[]) == []
    assert run_preprocessor(None, ROWS, task_id="qa", pool=pool) == ROWS


def test_preprocess_seam_takes_a_task(pool):
    task = {"id": "t1", "preprocess": {"type": "python", "source": "def transform(row): return {'x': row['a']}"}}
    assert preprocess(task, ROWS[:2], pool=pool) == [{"x": 0}, {"x": 1}]
    assert preprocess(SimpleNamespace(id="t2", preprocess=None), ROWS, pool=pool) == ROWS
    with pytest.raises(PreprocessError, match="task 't1'"):
        preprocess({"id": "t1", "preprocess": {"source": "def transform(row): return 1"}}, ROWS, pool=pool)


def test_sync_call_inside_a_running_loop_and_async_form(pool):
    source = "def transform(row): return {'a': row['a'] + 1}"

    async def notebook_cell():
        sync = run(pool, source)  # plain call while a loop is running (as in Jupyter)
        async_ = await arun_preprocessor({"source": source}, ROWS, task_id="qa", pool=pool)
        return sync, async_

    sync, async_ = asyncio.run(notebook_cell())
    assert sync == async_ == [{"a": i + 1} for i in range(5)]


def test_user_code_never_runs_in_this_process(pool):
    source = "import os\ndef transform(row): return {'pid': os.getpid(), 'cwd': os.getcwd()}"
    out = run(pool, source)
    assert all(r["pid"] != os.getpid() for r in out)
    assert all(r["cwd"] != os.getcwd() for r in out)


def test_default_pool_is_used_when_none_is_given():
    from evalnb.sandbox import default_pool

    assert run_preprocessor({"source": "def transform(row): return row"}, ROWS[:1], task_id="qa") == ROWS[:1]
    p = default_pool()
    assert p is default_pool() and not p.closed
    p.close()
    assert default_pool() is not p  # a closed default pool is replaced


def test_errors_are_sandbox_errors(pool):
    with pytest.raises(SandboxError):
        run(pool, "def transform(row): raise RuntimeError('x')")


def test_manifest_preprocess_spec(pool):
    from evalnb.suite import Suite

    manifest = {"tasks": [{
        "id": "qa", "type": "qa", "dataset": {"path": "x.jsonl"}, "prompt_template": "{{q}}",
        "grader": {"source": "def grade(s, i): return 1"},
        "preprocess": {"type": "python", "contract": "batch", "timeout_seconds": 3,
                       "source": "def process_docs(docs):\n    return [d for d in docs if d['a'] > 2]\n"},
    }]}  # fmt: skip
    task = Suite.from_dict(manifest).task("qa")
    assert preprocess(task, ROWS, pool=pool) == ROWS[3:]
