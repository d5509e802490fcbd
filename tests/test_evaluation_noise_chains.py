"""The noise-chain injector (tmem.evaluation.noise_chains, paper Exp-5): k revisions and a rollback after each chain
question's current state, gold UPDATE edges along them, a new corpus file (never over one), templates checked."""
import json

import pytest

from tmem.analysis.chains import gold_chain
from tmem.cli import main as cli
from tmem.corpora.jsonl import load_jsonl_file
from tmem.demo import generate
from tmem.demo.writers import write_jsonl
from tmem.evaluation.noise_chains import PLUMBING, inject, load_templates
from tmem.types import UPDATE, CorpusError


@pytest.fixture(scope="module")
def mini():
    return generate(7, 600, 1)


def test_each_chain_gets_k_revisions_and_a_rollback_after_its_state(mini):
    result = inject(mini, 2, PLUMBING, True)
    assert result.plumbing and result.chains > 0
    golds_before = {g.question_id: g for _, g in mini.golds}
    golds = {g.question_id: g for _, g in result.data.golds}
    by_id = {m.id: m for m in result.data.messages}
    edges = [link for link in result.data.links if link[-1] == UPDATE]
    planned = [link for link in mini.links if link[-1] == UPDATE]  # the demo's own gold (the generator's plan)
    assert set(planned) <= set(edges) and len(edges) - len(planned) == 3 * result.chains
    assert len(result.data.messages) == len(mini.messages) + 3 * result.chains
    changed = [q for q, g in golds.items() if g != golds_before[q]]
    assert len(changed) == result.chains
    for qid in changed:
        rollback = golds[qid].evidence[-1][0]
        assert rollback.endswith("~rollback") and golds[qid].answer == golds_before[qid].answer
        state = by_id[rollback.split("~")[0]]
        assert state.author in by_id[rollback].text and state.text in by_id[rollback].text  # restores the state
        chain = gold_chain(golds[qid], [(c, p, r) for _, c, p, r in edges])
        assert {u[0] for u in chain} >= {state.id, f"{state.id}~rev1", f"{state.id}~rev2", rollback}
        assert state.timestamp < by_id[f"{state.id}~rev1"].timestamp < by_id[rollback].timestamp
    assert len(mini.messages) == 600, "the original corpus is left as it was"


def test_a_noise_corpus_round_trips_through_jsonl_with_typed_edges(mini, tmp_path):
    result = inject(mini, 1, PLUMBING, True, limit=2)
    write_jsonl(result.data, tmp_path / "noise.jsonl")
    again = load_jsonl_file(tmp_path / "noise.jsonl")
    assert result.chains == 2 and sorted(again.links) == sorted(result.data.links)


def test_templates_are_checked_and_name_the_file_and_field(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"revision": ["we switch to {value}"], "rollback": ["back to {text}"]}))
    with pytest.raises(CorpusError, match=r"t\.json: field 'revision'.*unknown placeholder"):
        load_templates(path)
    path.write_text(json.dumps({"revision": [], "rollback": ["x"]}))
    with pytest.raises(CorpusError, match="field 'revision' must be a non-empty list"):
        load_templates(path)
    path.write_text(json.dumps({"revision": ["{author} changes it ({i}/{k})"], "rollback": ["back: {text}"]}))
    assert load_templates(path) == ({"revision": ["{author} changes it ({i}/{k})"], "rollback": ["back: {text}"]},
                                    False)


def test_the_command_writes_a_new_file_and_never_over_one(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("TMEM_EMBEDDER", "lexical")
    from mini_corpus import mini_db

    db = mini_db(tmp_path)
    out = tmp_path / "noise.jsonl"
    assert cli(["noise-chains", "--db", str(db), "--corpus", "mini", "--k", "2", "--out", str(out)]) == 0
    assert "offline plumbing templates" in capsys.readouterr().out and out.exists()
    before = out.read_bytes()
    assert cli(["noise-chains", "--db", str(db), "--corpus", "mini", "--out", str(out)]) != 0
    assert "exists" in capsys.readouterr().err and out.read_bytes() == before
