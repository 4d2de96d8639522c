"""Every comparison shows what changed in the prompt: changes(), browse, the run page, the exported notebook.

v1 and v2 of a sentiment task differ by one added sentence (helpers.variant_kit); the stand-in
server answers by the prompt, so v2 fixes the factual reviews. Each view must show that sentence
as inserted (``<ins>`` and a visible ``[+ +]``), name the baseline by its name and then its id,
and keep user text inert (a hostile template stays text).
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser

import pytest

import evalnb
from evalnb import Model
from evalnb.textdiff import word_diff_html, word_diff_text
from helpers.jupyterlab import CHROMIUM
from helpers.variant_kit import DEFINED, DEFINITION, PLAIN, reads_prompt, sentiment_manifest

pytestmark = pytest.mark.usefixtures("evalnb_home")
INSERTED = re.compile(r"<ins[^>]*>\[\+" + re.escape(DEFINITION) + r"\+\]</ins>")


class _Text(HTMLParser):
    """What a page shows outside <script>/<style>, as text."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self.tags: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag, attrs):
        self._hidden += tag in ("script", "style")
        if not self._hidden:
            self.tags.append(tag)

    def handle_endtag(self, tag):
        self._hidden -= tag in ("script", "style")

    def handle_data(self, data):
        if not self._hidden:
            self.parts.append(data)


def _visible(html: str) -> _Text:
    page = _Text()
    page.feed(html)
    return page


@pytest.fixture
def runs(tmp_path, model_server):
    server = model_server(reads_prompt)
    data = tmp_path / "data"
    v1 = evalnb.Suite.from_dict(sentiment_manifest(data), base_dir=data)
    manifest = v1.to_dict()
    manifest["tasks"][0]["prompt_template"] = DEFINED
    v2 = evalnb.Suite.from_dict(manifest, base_dir=data)
    models = [Model("strong", base_url=server.base_url, api="chat"), Model("weak", base_url=server.base_url)]
    before = evalnb.run(v1, models, progress=False, name="v1: plain prompt")
    after = evalnb.run(v2, models, progress=False, name="v2: neutral defined")
    both = evalnb.run(v1, models, progress=False, name="two prompts",
                      variants={"plain": {}, "defined": {"prompt_template": DEFINED}})
    return before, after, both


def test_word_diff_marks_words_with_and_without_colour():
    assert word_diff_text("a b c", "a x c") == "a [-b-][+x+] c"
    html = word_diff_html("say <b>hi</b>", "say <b>hi</b> now")
    assert "&lt;b&gt;hi&lt;/b&gt;" in html and "<b>" not in html  # user text stays text
    assert re.search(r"<ins[^>]*>\[\+now\+\]</ins>", html)
    assert word_diff_text("same", "same") == "same"


def test_changes_lists_the_fields_and_the_words(runs):
    before, after, both = runs
    changes = after.changes(before)
    table = changes.table
    assert table[["task_id", "field", "old", "new"]].values.tolist() == [["reviews", "prompt_template", PLAIN, DEFINED]]
    assert f"[+{DEFINITION}+]" in str(changes)
    assert str(changes).startswith("What changed: v2: neutral defined (eval_run_")
    assert INSERTED.search(changes.html()) and f"v1: plain prompt ({before.run_id})" in changes.html()
    assert len(before.changes(before)) == 0 and "nothing changed" in before.changes(before).html()
    # a run with variants: each variant against the first, without a baseline
    own = both.changes()
    assert own.table[["variant", "field"]].values.tolist() == [["defined", "prompt_template"]]
    with pytest.raises(ValueError, match="needs a baseline run"):
        before.changes()


def test_browse_against_the_baseline_shows_both_prompts_with_the_sentence_inserted(runs):
    before, after, _ = runs
    html = after.browse(baseline=before, static_pages=None).static_html()
    shown = re.sub(r"\s+", " ", "".join(_visible(html).parts))
    changed = after.changed_items(before)
    assert len(changed) == 10  # the factual reviews
    # the changes block once, then each changed item's prompt with the sentence marked as inserted
    assert len(INSERTED.findall(html)) == 1 + len(changed)
    assert f"[+{DEFINITION}+]" in shown  # readable without colour
    assert f"baseline: v1: plain prompt ({before.run_id})" in shown
    assert html.index("What changed") < html.index("sample_index")


def test_browse_of_a_variant_run_shows_each_variants_prompt_side_by_side(runs):
    _, _, both = runs
    view = both.browse(static_pages=None)
    assert view.models == ["strong · plain", "strong · defined", "weak · plain", "weak · defined"]
    html = view.static_html()
    assert len(INSERTED.findall(html)) == 1 + 30  # the changes block, then every item
    page = view.pages[1]
    assert [s["model"] for s in page.samples] == view.models
    assert [s["extracted_output"] for s in page.samples] == ["positive", "neutral", "positive", "neutral"]


def test_run_page_opens_with_what_changed_and_names_the_baseline(runs, tmp_path):
    before, after, both = runs
    path = evalnb.report(after, tmp_path / "v2.html", baseline=before)
    html = path.read_text(encoding="utf-8")
    page = _visible(html)
    shown = " ".join(page.parts)
    assert "What changed in the prompt" in shown and INSERTED.search(html)
    assert shown.index("What changed in the prompt") < shown.index("Metrics")
    assert f"Against baseline run v1: plain prompt ({before.run_id})" in shown
    assert f"strong: v2: neutral defined ({after.run_id}) − v1: plain prompt ({before.run_id})" in shown  # verdicts
    assert "evalnb run v2: neutral defined" in shown
    variant_page = evalnb.report(both, tmp_path / "both.html").read_text(encoding="utf-8")
    assert "What changed in the prompt" in variant_page and INSERTED.search(variant_page)
    assert "strong · defined" in variant_page


def test_hostile_template_text_stays_text(tmp_path, model_server):
    server = model_server(reads_prompt)
    data = tmp_path / "data"
    suite = evalnb.Suite.from_dict(sentiment_manifest(data), base_dir=data)
    hostile = "<script>alert(1)</script><img src=x onerror=alert(2)> " + PLAIN
    result = evalnb.run(suite, [Model("strong", base_url=server.base_url, api="chat")], progress=False,
                        variants={"plain": {}, "evil": {"prompt_template": hostile}})
    for html in (result.changes().html(), result.browse().static_html(),
                 evalnb.report(result, tmp_path / "evil.html").read_text(encoding="utf-8")):
        page = _visible(html)
        assert "img" not in page.tags
        assert "<script>alert(1)" not in html


@pytest.mark.skipif(not CHROMIUM.exists() and not os.environ.get("CI"), reason="no /usr/bin/chromium")
def test_run_page_in_chromium_offline_marks_each_changed_prompt(runs, tmp_path):
    from playwright.sync_api import expect

    from helpers.offline_browser import offline_page

    before, after, _ = runs
    path = evalnb.report(after, tmp_path / "v2.html", baseline=before)
    with offline_page() as (page, refused):
        page.goto(path.as_uri())
        page.click("button.filter[data-filter='changed']")
        inserted = page.locator("#items ins")
        expect(inserted.first).to_contain_text(f"[+{DEFINITION}+]")
        assert page.locator("#items .item").count() >= 1
        expect(page.locator("header")).to_contain_text(f"v1: plain prompt ({before.run_id})")
    assert not refused


def test_the_diffs_display_starts_with_what_changed(runs):
    before, after, _ = runs
    from evalnb.results.diff import DIFF_COLUMNS

    diff = after.diff(before)
    assert list(diff.columns) == list(DIFF_COLUMNS) and isinstance(diff, __import__("pandas").DataFrame)
    html = diff._repr_html_()
    table = html.index("<table")
    found = INSERTED.search(html)
    assert found and found.start() < table  # the inserted sentence, marked, before the numbers
    assert -1 < html.index("v2: neutral defined") < table
    assert -1 < html.index(f"v1: plain prompt ({before.run_id})") < table
    assert "mean_diff" in html[table:] and "n_fixed" in html[table:]  # every column shown
    text = repr(diff)
    assert text.startswith("What changed: v2: neutral defined") and f"[+{DEFINITION}+]" in text
    assert text.index("mean_diff") > text.index(DEFINITION)
    plain = diff[diff["model"] == "strong"]  # whatever pandas builds from it is a plain DataFrame
    assert type(plain).__name__ == "DataFrame" and "What changed" not in repr(plain)


def test_a_variant_run_diffs_each_variant_against_a_baseline_without_variants(runs):
    before, after, both = runs
    diff = both.diff(before)
    assert list(diff.columns[:3]) == ["task_id", "model", "variant"]
    assert sorted(set(zip(diff["model"], diff["variant"]))) == [
        ("strong", "defined"), ("strong", "plain"), ("weak", "defined"), ("weak", "plain")]
    plain = diff[diff["variant"] == "plain"]
    assert (plain["mean_diff"] == 0).all() and (plain["n_fixed"] == 0).all()  # the same prompt as v1
    defined = diff[diff["variant"] == "defined"].drop(columns="variant").reset_index(drop=True)
    by_hand = after.diff(before)  # v2's prompt is the variant's: the same pairs, the same numbers
    import pandas as pd

    pd.testing.assert_frame_equal(pd.DataFrame(defined), pd.DataFrame(by_hand), check_like=True)
    assert (defined["n_fixed"] > 0).all()
    assert INSERTED.search(diff._repr_html_())  # the defined variant's sentence, against v1
    with pytest.raises(ValueError, match=r"the baseline two prompts \(eval_run_\w+\) has prompt variants "
                                         r"\(plain, defined\).*diff the other way round.*paired"):
        before.diff(both)
