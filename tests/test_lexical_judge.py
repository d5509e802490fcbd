"""The offline lexical judge (tmem.models.lexical_judge via OfflineJudge): hand-written cases for negation,
polarity, "no"/"unknown", exact dates and numbers, whole-token containment, and answers from dev a judge must not
accept (a negated name, an opposite polarity, a near date)."""
import pytest

from tmem.models.lexical_judge import dates, is_abstention, key_tokens, lexical_verdict, negated, polarity
from tmem.models.offline import ABSTENTION, OfflineJudge
from tmem.prompts import Prompt
from tmem.types import Question

Q = Question("q", "s", "Who owns it?", "U1")
P = Prompt("judge", "", "")

CASES = [
    # --- answers from dev a judge must not accept
    ("Alice owns it", "Bob owns it, not Alice", False, "negation"),
    ("No", "There is no doubt: yes, they shipped it.", False, "polarity"),
    ("No", "Yes, they did.", False, "polarity"),
    ("Alice owns it", "It is unknown to Bob, but Alice owns it.", True, "contained"),
    ("2025-06-06", "2025-06-11", False, "different date"),  # data/cases/dev BudgetPlanning temporal_1
    # --- negation and polarity
    ("Alice owns it", "Alice does not own it.", False, "negation"),
    ("Alice owns it", "Alice owns it, not Bob.", True, "contained"),
    ("Alice owns it", "Not Alice.", False, "negation"),
    ("Alice owns it", "It was not Bob but Alice who owns it.", True, "contained"),
    ("Alice does not own it", "Alice owns it.", False, "negation"),
    ("Alice does not own it", "Alice doesn't own it.", True, "F1"),
    ("The launch was not delayed", "The launch was delayed by a week.", False, "negation"),
    ("They never used Stripe", "They used Stripe for years.", False, "negation"),
    ("Instead of Stripe, Adyen.", "Adyen, not Stripe.", True, "F1"),
    ("Instead of Stripe, Adyen.", "They switched from Stripe to Adyen.", True, "F1"),
    ("Instead of Stripe, Adyen.", "Stripe.", False, "F1"),
    ("Yes", "Yes, she did.", True, "polarity"),
    ("Yes", "She did not.", False, "polarity"),
    ("No", "No, never.", True, "polarity"),
    ("No", "She never went there.", True, "polarity"),
    ("No", "Nope.", True, "polarity"),
    ("Yes, she adopted a dog", "Yes, a dog was adopted by her.", True, "F1"),
    ("Yes, she adopted a dog", "No, she adopted a cat.", False, "polarity"),
    # --- abstention and "unknown"
    (ABSTENTION, "Not mentioned in the conversation.", True, "abstention"),
    (ABSTENTION, "Adyen", False, "abstention"),
    ("Adyen", ABSTENTION, False, "abstention"),
    (ABSTENTION, "Unknown.", True, "abstention"),
    (ABSTENTION, "The vendor is unknown", True, "abstention"),
    ("An unknown caller phoned the desk", "An unknown caller phoned the desk at noon.", True, "contained"),
    ("Adyen", "Adyen; the reason is unknown to me but the choice is clear.", True, "contained"),
    (ABSTENTION, "The answer cannot be determined from the chat.", True, "abstention"),
    # --- dates and numbers
    ("2025-05-01", "It was decided on 1 May, 2025.", True, "same date"),
    ("2025-05-01", "May 1, 2025", True, "same date"),
    ("2025-05-01", "2025-05-02", False, "different date"),
    ("2025-05-01", "Sometime in May.", False, "date"),
    ("7 May 2023", "On May 7, 2023.", True, "same date"),
    ("March 17", "March 3", False, "numbers"),
    ("March 17", "It moved to March 17.", True, "contained"),
    ("March 17", "We're moving go-live to March 17 instead of March 3.", True, "contained"),  # tmem/demo/golden.py
    ("Alice owns it", "Alice, not Bob, owns it.", True, "F1"),
    ("March 17", "17 March", True, "F1"),
    ("March 17", "Mar 17", True, "F1"),
    ("March 17", "April 17", False, "numbers"),
    ("three cats and two dogs", "2 dogs and 3 cats", True, "F1"),
    ("paging at 5% errors", "paging at 10% errors", False, "numbers"),
    ("a 14-day soak in staging", "a fourteen day soak", False, "numbers"),  # 14 > twelve: not mapped, honestly
    ("on Tuesday", "on Thursday", False, "numbers"),
    ("You may leave early", "Leaving early is fine, you may.", True, "F1"),  # "may" the verb is no month
    # --- containment and F1
    ("Adyen", "The gateway is now Adyen.", True, "contained"),
    ("art", "We start the build.", False, "F1"),  # whole tokens only: "art" is not in "start"
    ("shadow traffic at 20%", "contract checks against the sandbox", False, "F1"),
    ("The load test report, by April 20.", "You owe the load test report by April 20.", True, "F1"),
]


@pytest.mark.parametrize("gold, answer, correct, rule", CASES, ids=[f"{i}-{c[3]}" for i, c in enumerate(CASES)])
def test_lexical_verdict(gold, answer, correct, rule):
    verdict, why = lexical_verdict(gold, answer)
    assert verdict is correct, why


def test_enough_hand_written_cases():
    assert len(CASES) >= 35


def test_the_judge_role_says_which_rule_decided():
    verdict = OfflineJudge().judge(Q, "Alice owns it", "Bob owns it, not Alice", P)
    assert not verdict.correct and "offline lexical judge: negation: the answer negates alice" in verdict.raw
    verdict = OfflineJudge().judge(Q, "2025-06-06", "2025-06-11", P)
    assert not verdict.correct and "different date (2025-06-11 for 2025-06-06)" in verdict.raw


def test_helpers():
    assert negated("Bob owns it, not Alice") == {"alice"}
    assert negated("It was not Bob but Alice") == {"bob"}
    assert negated("Alice doesn't own it") == {"own"}
    assert polarity("No, never.") == "no" and polarity("She did not.") == "no" and polarity("Sure thing") == "yes"
    assert is_abstention("Unknown") and is_abstention("The date is unknown.")
    assert not is_abstention("An unknown caller phoned") and not is_abstention("no")
    assert dates("1 May, 2025 and 2025-06-06") == {"2025-05-01", "2025-06-06"}
    assert key_tokens("Mar 3, the third, on Tuesday; you may") == {"march", "3", "tuesday"}
