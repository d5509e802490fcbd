"""The shipped prompts are the paper's (App. I, J, K): compared word for word with the paper's text."""
import re

import pytest
from conftest import SHARED

from tmem.prompts import NAMES, answer_prompt, fill, judge_prompt, prompt_hash, prompt_text

PAPER = SHARED / "paper" / "t-mem-paper.md"


def words(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


@pytest.fixture(scope="module")
def paper_words():
    if not PAPER.exists():
        pytest.skip(f"{PAPER} not present")
    text = PAPER.read_text(encoding="utf-8").replace("\\mid", "")  # LaTeX separator
    # the paper's HTML rendering prints each inline formula twice (plain, then LaTeX source)
    return words(text).replace("eijrqearliermessagelatermessageeijrqtextearliermessagetextlatermessage",
                               "eijrqearliermessagelatermessage")


@pytest.mark.parametrize("name", NAMES)
def test_prompt_text_is_in_the_paper(name, paper_words):
    text = prompt_text(name)
    if name in ("evidence_utility", "relation"):
        text = text.split("Required output")[0]  # the JSON example is typeset with diacritics in the paper
    for placeholder in ("<asking_user_id>", "<question>", "<serialized_retrieved_messages>", "<gold_answer>",
                        "<agent_answer>"):
        text = text.replace(placeholder, placeholder.strip("<>").replace("_", ""))
    assert words(text) in paper_words


def test_fill_is_single_pass_and_leaves_unknown_brackets():
    assert fill("Q: <question> <other>", question="<question> {x}") == "Q: <question> {x} <other>"


def test_answer_and_judge_prompts():
    forest = answer_prompt("forest", "User_1", "Who?", "PASSAGES")
    flat = answer_prompt("flat", "User_1", "Who?", "PASSAGES")
    assert "UPDATE marks a change" in forest.system and "UPDATE" not in flat.system
    assert forest.user == flat.user and "Asking user: User_1\nQuestion: Who?\n" in forest.user
    assert forest.hash != flat.hash
    judge = judge_prompt("Q?", "gold", "agent")
    assert judge.user == "Question: Q?\nGold Answer: gold\nAgent Answer: agent"
    assert len(prompt_hash("relation")) == 16
