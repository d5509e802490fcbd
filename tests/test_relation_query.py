"""The question settles near ties of the fitted relation role (tmem/models/relation/query.py): a near tie of two
parent candidates goes to the one clearly more relevant to the question; no question, or the child's own text as
the question, changes nothing; the reason says when the question decided; the structuring config turns it on."""
import json
import math
from datetime import datetime, timedelta

import numpy as np
import pytest

from tmem.config import StructuringConfig
from tmem.models.relation import rule_for
from tmem.models.relation.features import LABEL_FEATURES, PAIR_FEATURES, ROOT_FEATURES
from tmem.models.relation.fitted import FittedRelation
from tmem.models.relation.query import (
    conditions_on,
    coverage,
    near_tie,
    question_cosines,
    question_relevance,
    settle_tie,
)
from tmem.models.relation.signals import scope_idf
from tmem.pipeline.scope import Scope
from tmem.types import Message, Question

T0 = datetime(2025, 5, 5, 9)


def m(mid, minutes, text, author="pm"):
    return Message(mid, "s", text, T0 + timedelta(minutes=minutes), author=author, topic="vendors")


EMAIL = m("a", 0, "Vendor for the email campaign is Mailjet, contract signed Monday.")
SMS = m("b", 10, "Vendor for the SMS campaign is Twilio, contract signed Monday.", "ops")
CHILD = m("c", 20, "Contract review for the vendor happens Friday.", "legal")
SCOPE = Scope("c", "s", [EMAIL, SMS, CHILD])
ASKS_SMS = Question("q1", "s", "Which vendor handles the SMS campaign?", "u")
ASKS_EMAIL = Question("q2", "s", "Which vendor handles the email campaign?", "u")

# Scope IDF of 3 messages, log((N + 1) / (df + 1)) + 1: vendor (df 3) 1, campaign (df 2) log(4/3) + 1, sms (df 1)
# log 2 + 1, handles (df 0) log 4 + 1. The SMS question's mass is their sum; the email message covers vendor and
# campaign, the SMS message also sms, and states the question's one value ('sms': + 0.5).
MASS = 1 + (math.log(4 / 3) + 1) + (math.log(2) + 1) + (math.log(4) + 1)
REL_EMAIL = (1 + math.log(4 / 3) + 1) / MASS  # 0.359
REL_SMS = (1 + math.log(4 / 3) + 1 + math.log(2) + 1) / MASS + 0.5  # 1.125


def weights_file(tmp_path, pair=None):
    """All weights 0 but the given pair weights: with none, every option scores 0, a three-way tie of the email
    message, the SMS message and ROOT (1/3 each), which the model's stable order gives to the email message."""
    data = {"pair": {n: 0.0 for n in PAIR_FEATURES} | (pair or {}), "root": {n: 0.0 for n in ROOT_FEATURES},
            "label": {n: 0.0 for n in LABEL_FEATURES},
            "update": {n: 0.0 for n in LABEL_FEATURES} | {"bias": -50.0}}  # no UPDATE term in the parent choice
    path = tmp_path / f"w{len(list(tmp_path.iterdir()))}.json"  # a new name each time: loaded weights are cached
    path.write_text(json.dumps(data))
    return str(path)


def decide(tmp_path, question, query_ties=True, pair=None):
    role = FittedRelation(weights_path=weights_file(tmp_path, pair), query_ties=query_ties)
    (choice,) = role.label_pairs(question, CHILD, [EMAIL, SMS], SCOPE).choices
    return choice


def test_the_question_relevance_is_its_covered_idf_mass_plus_its_named_values():
    idf = scope_idf(SCOPE)
    assert coverage({"vendor", "sms"}, {"vendor"}, idf) == pytest.approx(1 / (1 + math.log(2) + 1))
    assert coverage(set(), {"vendor"}, idf) == 0.0
    assert question_relevance(ASKS_SMS, [EMAIL, SMS], SCOPE) == pytest.approx([REL_EMAIL, REL_SMS])
    # the embedder's cosine adds half of itself
    assert question_relevance(ASKS_SMS, [EMAIL, SMS], SCOPE, np.array([0.2, 0.4])) == pytest.approx(
        [REL_EMAIL + 0.1, REL_SMS + 0.2])


def test_a_near_tie_is_between_two_parents_within_the_margin_never_root():
    assert near_tie(np.array([0.40, 0.35, 0.25]), 2, 0.1) == (0, 1)
    assert near_tie(np.array([0.30, 0.45, 0.25]), 2, 0.1) is None  # 0.15 apart
    assert near_tie(np.array([0.30, 0.25, 0.45]), 2, 0.5) is None  # ROOT is the best option: no parent tie
    assert near_tie(np.array([0.20, 0.30, 0.40, 0.10]), 3, 0.15) == (2, 1)  # ROOT (last, 0.10) plays no part
    assert near_tie(np.array([0.6, 0.4]), 1, 0.5) is None  # one candidate


def test_an_empty_question_or_the_childs_own_text_cannot_condition():
    assert conditions_on(ASKS_SMS, CHILD)
    assert not conditions_on(None, CHILD)
    assert not conditions_on(Question("q", "s", "  ", None), CHILD)
    # `links --query child`: the question is the child's text (case and spacing aside)
    assert not conditions_on(Question("q", "s", "contract review for  the vendor happens Friday. ", None), CHILD)


def test_the_question_settles_a_tie_for_the_candidate_it_names(tmp_path):
    """Tied at 1/3 each, the model takes the email message; the question asks about the SMS campaign, which the
    SMS message names (relevance 1.13 against 0.36): it wins, and the reason says so."""
    choice = decide(tmp_path, ASKS_SMS)
    assert choice.parent_id == "b"
    assert "question settled a tie: b over a (margin 0.00, question relevance 1.13 vs 0.36)" in choice.reason
    assert "runner-up a p=0.33 (the model's choice)" in choice.reason
    tie = settle_tie(ASKS_SMS, CHILD, [EMAIL, SMS], np.full(3, 1 / 3), SCOPE)
    assert (tie.winner, tie.loser, tie.margin) == (1, 0, 0.0)
    assert (tie.relevance_winner, tie.relevance_loser) == pytest.approx((REL_SMS, REL_EMAIL))


@pytest.mark.parametrize("question", [Question("q", "s", "", None), Question("q", "s", CHILD.text, None), ASKS_EMAIL])
def test_no_question_the_childs_text_or_a_question_for_the_models_choice_change_nothing(tmp_path, question):
    choice = decide(tmp_path, question)
    assert choice.parent_id == "a" and "question settled" not in choice.reason
    assert choice.reason == decide(tmp_path, ASKS_SMS, query_ties=False).reason


def test_off_or_outside_the_margin_the_model_decides(tmp_path):
    assert decide(tmp_path, ASKS_SMS, query_ties=False).parent_id == "a"
    # 'latest' +1: the SMS message p = e / (e + 2) = 0.58, the email one 0.21: no near tie, the email question
    # that names the other one does not overturn it
    choice = decide(tmp_path, ASKS_EMAIL, pair={"latest": 1.0})
    assert choice.parent_id == "b" and "question settled" not in choice.reason


def test_a_lead_too_small_to_be_clear_settles_nothing():
    assert settle_tie(ASKS_SMS, CHILD, [EMAIL, SMS], np.full(3, 1 / 3), SCOPE, lead=0.8) is None  # lead 0.77


class Vectors:
    """An embedder double: fixed unit vectors per text (the question's and the candidates')."""
    name = "double"

    def __init__(self, table):
        self.table = table

    def embed(self, texts, kind="passage"):
        return np.array([self.table[t] for t in texts], dtype=float)


def test_the_embedders_cosine_reads_the_scope_vectors_and_one_question_vector():
    embedder = Vectors({ASKS_SMS.text: [1.0, 0.0], EMAIL.text: [0.6, 0.8], SMS.text: [1.0, 0.0],
                        CHILD.text: [0.0, 1.0]})
    assert question_cosines(ASKS_SMS, [EMAIL, SMS], SCOPE, embedder) == pytest.approx([0.6, 1.0])
    assert question_cosines(ASKS_SMS, [EMAIL, SMS], SCOPE, None) is None
    assert question_cosines(ASKS_EMAIL, [EMAIL, SMS], SCOPE, embedder) is None  # the embedder fails: lexical only


def test_the_structuring_config_turns_it_on_and_sets_the_margin():
    role = rule_for(StructuringConfig(query_ties=True, query_tie_margin=0.2))
    assert (role.query_ties, role.query_margin) == (True, 0.2)
    default = rule_for(StructuringConfig())
    assert (default.query_ties, default.query_margin) == (False, 0.15)
