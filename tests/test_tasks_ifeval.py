"""`ifeval`: offline checkers, fraction-of-constraints reward, SSR/HSR, unknown ids, generator."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgrpo.tasks import get_task, score_completions
from pgrpo.tasks.ifeval import _conflicts, generate_prompts
from pgrpo.tasks.ifeval_checkers import (
    build_checker,
    check_response,
    count_sentences,
    known_instruction_ids,
    use_offline_tokenizers,
    word_tokenize,
)

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
needs_data = pytest.mark.skipif(not (DATA / "ifeval").is_dir(), reason="shared/data absent")


def _ex(ids, kwargs, prompt="Write something."):
    return {"key": 1, "prompt": prompt, "instruction_id_list": ids, "kwargs": kwargs}


def test_offline_sentence_splitter_handles_abbreviations():
    assert count_sentences("Mr. Smith went to Washington. He arrived at 5 p.m. on Monday.") == 2
    assert count_sentences("Dr. Who is here! Is it e.g. fine? Yes.") == 3
    assert count_sentences("") == 0
    import nltk  # why not NLTK's untrained Punkt: it splits after "Mr." and "p.m."

    untrained = nltk.PunktSentenceTokenizer().tokenize(
        "Mr. Smith went to Washington. He arrived at 5 p.m. on Monday."
    )
    assert len(untrained) == 4
    assert word_tokenize("Mr. Smith is HERE. I AM fine.") == [
        "Mr.", "Smith", "is", "HERE", ".", "I", "AM", "fine", "."
    ]  # fmt: skip


def test_reference_checkers_that_need_punkt_work_offline():
    text = "Mr. Smith went to Washington. He arrived at 5 p.m. on Monday."
    sentences = build_checker(
        "length_constraints:number_sentences", {"num_sentences": 3, "relation": "less than"}, ""
    )
    assert sentences.check_following(text)  # 2 sentences < 3 (an untrained punkt finds 4)
    capitals = build_checker(
        "change_case:capital_word_frequency",
        {"capital_frequency": 2, "capital_relation": "at least"},
        "",
    )
    assert capitals.check_following("I AM VERY happy") and not capitals.check_following("No caps")


def test_reward_is_fraction_of_constraints_and_empty_scores_zero():
    task = get_task("ifeval")
    ex = _ex(
        ["punctuation:no_comma", "startend:end_checker", "change_case:english_lowercase"],
        [{}, {"end_phrase": "Any other questions?"}, {}],
    )
    assert task.num_constraints(ex) == 3
    assert task.reward("hello there. Any other questions?", ex) == pytest.approx(2 / 3)
    assert task.reward("hello, there. Any other questions?", ex) == pytest.approx(1 / 3)
    assert task.reward("", ex) == 0.0 and task.reward("   \n", ex) == 0.0


def test_unknown_instruction_id_counts_as_not_followed_and_is_reported():
    task = get_task("ifeval")
    ex = _ex(["punctuation:no_comma", "made_up:constraint"], [{}, {"x": 1}])
    checks = task.check("no commas here", ex)
    assert [c.followed for c in checks] == [True, False]
    assert checks[1].unknown and not checks[0].unknown
    assert task.reward("no commas here", ex) == 0.5
    m = task.metrics(["no commas here"], [ex], [0.5])
    assert m["unknown_instruction_ids"] == 1.0 and m["ssr"] == 0.5 and m["hsr"] == 0.0


def test_checker_error_is_not_followed_with_the_reason():
    checks = check_response("text", ["keywords:frequency"], [{"relation": "about"}])
    assert not checks[0].followed and "relation" in checks[0].error


def test_loose_accepts_what_strict_rejects():
    ex = _ex(["startend:quotation"], [{}])
    response = 'Sure, here it is:\n"A quoted answer."'
    assert get_task("ifeval").reward(response, ex) == 0.0
    assert get_task("ifeval", loose=True).reward(response, ex) == 1.0


def test_ssr_and_hsr_by_hand():
    task = get_task("ifeval")
    examples = [
        _ex(["punctuation:no_comma", "change_case:english_lowercase"], [{}, {}]),
        _ex(["punctuation:no_comma"], [{}]),
        _ex(["punctuation:no_comma", "startend:quotation", "detectable_format:title"], [{}] * 3),
    ]
    completions = ["all lowercase and no commas here", "a, b", '"<<Title>> quoted, text"']
    res = score_completions(task, completions, examples, timeout_s=30)
    assert res.isolation == "process" and res.errors == 0
    assert res.rewards == pytest.approx([1.0, 0.0, 2 / 3])
    m = task.metrics(completions, examples, res.rewards)
    assert m["ssr"] == pytest.approx(4 / 6)  # instruction level: 2 + 0 + 2 of 6
    assert m["hsr"] == pytest.approx(1 / 3)  # prompt level: only the first
    assert m["constraints_per_prompt"] == 2.0


def test_generated_prompts_are_seeded_valid_and_conflict_free():
    a = generate_prompts(40, seed=1)
    assert a == generate_prompts(40, seed=1) and a != generate_prompts(40, seed=2)
    known = set(known_instruction_ids())
    conflicts = _conflicts()
    sizes = set()
    for ex in a:
        ids = ex["instruction_id_list"]
        sizes.add(len(ids))
        assert 1 <= len(ids) <= 6 and len(set(ids)) == len(ids) and set(ids) <= known
        for i, x in enumerate(ids):
            assert not any(y in conflicts[x] for y in ids[i + 1 :])
        # the kwargs rebuild the same checker: its description is in the prompt
        for iid, kw in zip(ids, ex["kwargs"], strict=True):
            assert build_checker(iid, kw, ex["prompt"]).build_description(**kw) in ex["prompt"]
    assert len(sizes) >= 3
    one = generate_prompts(10, seed=0, min_constraints=2, max_constraints=2)
    assert all(len(ex["instruction_id_list"]) == 2 for ex in one)
    with pytest.raises(ValueError, match="min_constraints"):
        generate_prompts(1, min_constraints=0)


def test_generated_split_through_the_task():
    task = get_task("ifeval", n_generated=7, seed=3, max_constraints=3)
    examples = task.load("generated")
    assert len(examples) == 7 and all(task.num_constraints(e) <= 3 for e in examples)
    assert task.prompt(examples[0]) == examples[0]["prompt"]
    assert task.load("train") == examples  # training prompts: the generated ones


def test_kwargs_must_pair_with_ids(tmp_path):
    import json

    path = tmp_path / "input_data.jsonl"
    path.write_text(json.dumps(_ex(["punctuation:no_comma"], [{}, {}])) + "\n")
    with pytest.raises(ValueError, match="must pair up"):
        get_task("ifeval", data=str(tmp_path)).load("test")


@needs_data
def test_matches_the_reference_evaluator_on_real_ifeval_prompts():
    from if_verifiable.common import evaluate_instructions

    task = get_task("ifeval", data=str(DATA / "ifeval"))
    strict, loose = task, get_task("ifeval", loose=True)
    examples = task.load("test")
    assert len(examples) == 541
    registry = use_offline_tokenizers()
    response = (
        "My answer is yes.\nTHIS IS A TITLE <<poem of joy>>\n* point one\n* point two\n\n"
        "Section 1 here is some text, with a comma. P.S. thanks.\nAny other questions?"
    )

    # the reference swaps a non-letter `letter` ("!") for a random letter; we draw it with a fixed
    # seed (deterministic reward), so those prompts cannot match a random reference draw
    def deterministic(ex):
        return all(str(kw.get("letter", "a")).isalpha() for kw in ex["kwargs"])

    for ex in filter(deterministic, examples[:150]):
        _, ref = evaluate_instructions(
            response, ex["instruction_id_list"], ex["kwargs"], ex["prompt"], registry
        )
        assert strict.reward(response, ex) == pytest.approx(ref.partial_strict), ex["key"]
        assert loose.reward(response, ex) == pytest.approx(ref.partial_loose), ex["key"]


# A reasoning block was checked as part of the response (review 2026-12-04): on the 541 IFEval
# prompts, '<think>...</think>' + the prompt lowercased without commas passed every constraint
# of 84 prompts (strict) against the reference evaluator's 154, which strips the block.
@pytest.mark.parametrize(
    ("response", "reward"),
    [
        ("<think>Plan: one, two, three.</think>\nno commas at all", 1.0),  # was 0
        ("  <think>\nA, b.\n</think>\n\nno commas at all", 1.0),  # was 0
        ("Plan: one, two, three.</think>no commas at all", 1.0),  # '<think>' was in the prompt
        ("<think>Plan: never finished, so no answer", 0.0),
        ("no commas at all", 1.0),
        ("one, two", 0.0),
    ],
)
def test_a_thinking_block_is_not_checked(response, reward):
    task = get_task("ifeval")
    assert task.reward(response, _ex(["punctuation:no_comma"], [{}])) == reward


@needs_data
def test_thinking_responses_match_the_reference_evaluator_on_real_prompts():
    from if_verifiable.common import evaluate_instructions

    task = get_task("ifeval", data=str(DATA / "ifeval"))
    registry = use_offline_tokenizers()
    for ex in task.load("test")[:80]:
        if not all(str(kw.get("letter", "a")).isalpha() for kw in ex["kwargs"]):
            continue  # random letter in the reference (see the test above)
        response = "<think>Let me think, about this.</think>\n" + ex["prompt"].lower()
        _, ref = evaluate_instructions(
            response, ex["instruction_id_list"], ex["kwargs"], ex["prompt"], registry
        )
        assert task.reward(response, ex) == pytest.approx(ref.partial_strict), ex["key"]
