"""Rows with the real column schemas of the datasets behind six lm-eval tasks (made-up content).

`DATASETS[task] = (dataset_path, {config: {split: rows}})`; the content varies per row
(whitespace, punctuation, non-ASCII) so a prompt that differs from lm-eval's by one byte shows.
"""

from __future__ import annotations


def _arc(split: str, n: int) -> list[dict]:
    rows = []
    for i in range(n):
        labels = ["A", "B", "C", "D"] if i % 3 else ["1", "2", "3"]
        texts = [f"{split} option {j} for q{i}" + (" (é)" if j == 1 else "") for j in range(len(labels))]
        rows.append({"id": f"{split}-{i}", "question": f"Which {split} thing #{i} is true?",
                     "choices": {"text": texts, "label": labels}, "answerKey": labels[i % len(labels)]})
    return rows


def _mmlu(split: str, n: int) -> list[dict]:
    return [{"question": f"  Let G be a group of order {i + 4} ({split}). Is G abelian?  ",
             "subject": "abstract_algebra",
             "choices": [f"True{i}", "False", f"{i} only", "None of these"], "answer": i % 4}
            for i in range(n)]


def _hellaswag(split: str, n: int) -> list[dict]:
    return [{"ind": i, "activity_label": f"Making tea {split}",
             "ctx_a": f"A person [title] fills a kettle {i}.", "ctx_b": "then they",
             "ctx": f"A person fills a kettle {i}. then they",
             "endings": [f"boil it [step] {i}.", "drink  the kettle.", "sing.", f"wait {i} minutes."],
             "source_id": f"wikihow~{i}", "split": split, "split_type": "indomain", "label": str(i % 4)}
            for i in range(n)]


def _boolq(split: str, n: int) -> list[dict]:
    return [{"question": f"is the {split} sky blue on day {i}", "passage": f"Passage {i}: the sky — a dome.",
             "idx": i, "label": i % 2} for i in range(n)]


def _gsm8k(split: str, n: int) -> list[dict]:
    return [{"question": f"Tom has {i + 2} apples and buys {i} more ({split}). How many?",
             "answer": f"He has {i + 2} + {i} = <<{i + 2}+{i}={2 * i + 2}>>{2 * i + 2} apples.\n#### {2 * i + 2}"}
            for i in range(n)]


def _truthfulqa(split: str, n: int) -> list[dict]:
    return [{"question": f"What happens if you eat {i} watermelon seeds?",
             "mc1_targets": {"choices": [f"Nothing happens {i}.", "You grow watermelons.", "You die."],
                             "labels": [1, 0, 0]},
             "mc2_targets": {"choices": ["Nothing.", "Watermelons."], "labels": [1, 0]}}
            for i in range(n)]


def _triviaqa(split: str, n: int) -> list[dict]:
    return [{"question": f"Which city hosted event {i} ({split})", "question_id": f"tq{i}",
             "question_source": "web", "entity_pages": {"doc_source": [], "filename": [], "title": [],
                                                         "wiki_context": []},
             "search_results": {"description": [], "filename": [], "rank": [], "title": [], "url": [],
                                "search_context": []},
             "answer": {"aliases": [f"City {i}", f"C{i}", "Paris, France"], "normalized_aliases": [f"city {i}"],
                        "matched_wiki_entity_name": "", "normalized_matched_wiki_entity_name": "",
                        "normalized_value": f"city {i}", "type": "WikipediaEntity", "value": f"City {i}"}}
            for i in range(n)]


def _lambada(split: str, n: int) -> list[dict]:
    words = ["kettle", "garden", "river", "lantern", "harbour", "meadow"]
    return [{"text": f"She walked {i} miles along the quiet road and at last she saw the {words[i % len(words)]}"}
            for i in range(n)]


def _pile(split: str, n: int) -> list[dict]:
    return [{"text": f"We prove theorem {i}.  The proof uses   induction on n — and ends here.", "meta": {"i": i}}
            for i in range(n)]


def _nq_open(split: str, n: int) -> list[dict]:
    return [{"question": f"who wrote the {split} song number {i}", "answer": [f"Ann Lee {i}", "the Beatles"]}
            for i in range(n)]


def _unscramble(split: str, n: int) -> list[dict]:
    words = ["garden", "lantern", "harbour", "meadow", "kettle"]
    return [{"context": f"Please unscramble the letters into a word, and write that word:\n"
                        f"{words[i % 5][0]}{words[i % 5][2:0:-1]}{words[i % 5][3:]} =",
             "completion": f" {words[i % 5]}"} for i in range(n)]


DATASETS = {
    "arc_easy": ("allenai/ai2_arc", {"ARC-Easy": {"train": _arc("train", 6), "validation": _arc("validation", 4),
                                                   "test": _arc("test", 5)}}),
    "mmlu_abstract_algebra": ("cais/mmlu", {"abstract_algebra": {"dev": _mmlu("dev", 5), "validation": _mmlu("validation", 3),
                                                                  "test": _mmlu("test", 6)}}),
    "hellaswag": ("Rowan/hellaswag", {None: {"train": _hellaswag("train", 6), "validation": _hellaswag("validation", 5)}}),
    "boolq": ("aps/super_glue", {"boolq": {"train": _boolq("train", 6), "validation": _boolq("validation", 5)}}),
    "gsm8k": ("openai/gsm8k", {"main": {"train": _gsm8k("train", 7), "test": _gsm8k("test", 4)}}),
    "triviaqa": ("mandarjoshi/trivia_qa", {"rc.nocontext": {"train": _triviaqa("train", 5),
                                                             "validation": _triviaqa("validation", 4)}}),
    "lambada_openai": ("EleutherAI/lambada_openai", {"default": {"test": _lambada("test", 6)}}),
    "pile_arxiv": ("EleutherAI/pile", {"pile_arxiv": {"train": _pile("train", 4)}}),
    "nq_open": ("google-research-datasets/nq_open", {None: {"train": _nq_open("train", 5),
                                                              "validation": _nq_open("validation", 4)}}),
    "anagrams1": ("EleutherAI/unscramble", {"mid_word_1_anagrams": {"validation": _unscramble("validation", 4)}}),
    "truthfulqa_mc1": ("truthfulqa/truthful_qa", {"multiple_choice": {"validation": _truthfulqa("validation", 4)}}),
}


# --- more shapes (tests/lm_eval/test_context_shapes.py, test_metric_parity.py, the parity benchmark) ---

def blimp(n: int) -> list[dict]:
    """nyu-mll/blimp: an empty context, two sentences as choices."""
    return [{"sentence_good": f"Who should Derek hug {i} after shocking Richard?",
             "sentence_bad": f"Who should Derek hug {i} Richard after shocking?", "field": "syntax",
             "linguistics_term": "island_effects", "UID": "adjunct_island", "simple_LM_method": True,
             "one_prefix_method": False, "two_prefix_method": False, "lexically_identical": True,
             "pair_id": i} for i in range(n)]


def winogrande(split: str, n: int) -> list[dict]:
    """allenai/winogrande: multiple inputs (a context per option, one continuation)."""
    names = [("Sarah", "Maria"), ("the cup", "the table"), ("Tom", "Kevin")]
    return [{"sentence": f"{names[i % 3][0]} gave {names[i % 3][1]} a book because _ was done reading {i}.",
             "option1": names[i % 3][0], "option2": names[i % 3][1], "answer": "1" if i % 2 else "2"}
            for i in range(n)]


def spaced_lambada(n: int) -> list[dict]:
    """lambada rows, some with a double space before the last word: a context ending in a space."""
    words = ["kettle", "garden", "river", "lantern"]
    return [{"text": f"She walked {i} miles and at last{'  ' if i % 2 else ' '}she saw the "
                     f"{'' if i % 3 else ' '}{words[i % 4]}"} for i in range(n)]


EN = ["The house is small.", "I like green tea very much.", "Where is the station?", "The cat sleeps on the mat.",
      "We will meet tomorrow at noon.", "This book is old but good."]
DE = ["Das Haus ist klein.", "Ich mag grünen Tee sehr.", "Wo ist der Bahnhof?", "Die Katze schläft auf der Matte.",
      "Wir treffen uns morgen um zwölf.", "Dieses Buch ist alt, aber gut."]


def wmt16(pair: str) -> list[dict]:
    """wmt/wmt16 rows for a language pair (the German stands in for the other language too)."""
    other = pair.split("-")[0] if pair.split("-")[0] != "en" else pair.split("-")[1]
    return [{"translation": {other: de, "en": en}} for en, de in zip(EN, DE)]


QUESTIONS = ["What color is the sky", "How many legs does a spider have", "Who wrote Hamlet", "What is 2+2"]


def truthfulqa_gen(n: int) -> list[dict]:
    """truthfulqa/truthful_qa, config generation (process_results with sacrebleu and rouge-score)."""
    return [{"type": "Adversarial", "category": "Misc", "question": QUESTIONS[i] + "?",
             "best_answer": ["Blue", "Eight", "Shakespeare", "Four"][i],
             "correct_answers": [["The sky is blue", "Blue"], ["A spider has eight legs"], ["William Shakespeare"],
                                 ["2+2 is 4", "Four"]][i],
             "incorrect_answers": [["The sky is green"], ["Six legs"], ["Marlowe wrote it"], ["Five"]][i],
             "source": "made-up"} for i in range(n)]


def piqa(n: int) -> list[dict]:
    return [{"goal": f"To boil water number {i}", "sol1": "put it in a pot on the stove", "sol2": "put it in the fridge",
             "label": i % 2} for i in range(n)]


def sciq(n: int) -> list[dict]:
    return [{"question": f"What gas do plants take in ({i})?", "distractor1": "oxygen", "distractor2": "helium",
             "distractor3": "neon", "correct_answer": "carbon dioxide",
             "support": f"  Plants use light {i}. They take in a gas." if i % 2 else ""} for i in range(n)]


def openbookqa(n: int) -> list[dict]:
    return [{"id": f"o{i}", "question_stem": f"The sun is a source of ({i})",
             "choices": {"text": ["light", "rain", "soil", "wind"], "label": ["A", "B", "C", "D"]},
             "answerKey": "ABCD"[i % 4]} for i in range(n)]


def copa(n: int) -> list[dict]:
    return [{"premise": f"The man broke his toe {i}.", "choice1": "He dropped a hammer on his foot.",
             "choice2": "He got a hole in his sock.", "question": "cause" if i % 2 else "effect", "idx": i,
             "label": i % 2} for i in range(n)]


def cola(n: int) -> list[dict]:
    return [{"sentence": f"The sailors rode the breeze clear of the rocks {i}." if i % 3 else "Rocks the sailors.",
             "label": 1 if i % 3 else 0, "idx": i} for i in range(n)]


def unscramble(n: int) -> list[dict]:
    words = ["garden", "lantern", "harbour", "meadow", "kettle"]
    return [{"context": f"Please unscramble the letters into a word, and write that word:\n"
                        f"{words[i % 5][::-1]} =", "completion": f" {words[i % 5]}"} for i in range(n)]
