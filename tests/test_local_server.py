"""The `local` backend (tmem/models/local/server.py), its presets, reply patterns, and the recorded real-model demo
(tmem/models/local/recorded.py, data/recorded-local.json).

No test here runs the 1.1 GB Qwen model: the launcher is tested with the SmolLM2-135M package the suite already
installs (slow group, skipped without it), assembly with small byte parts, recording with the scripted fault
server standing in for llama.cpp, and the shipped recording is replayed through today's pipeline with no server.
"""
from __future__ import annotations

import hashlib
import json
import re

import pytest
from llm_server import free_port, llama_server_missing

from tmem import api
from tmem.cli import main as cli_main
from tmem.evaluation.scripted_server import FaultServer, scripted_reply
from tmem.models.factory import build_roles
from tmem.models.local import recorded
from tmem.models.local import server as local
from tmem.models.reply_patterns import label_pattern, trace_patterns
from tmem.models.settings import BackendSettings

LOCAL_MODEL = local.DEFAULT_MODEL


# ------------------------------------------------------------------------------------------------ assembly
def parts(tmp_path, chunks: list[bytes]):
    paths = []
    for i, chunk in enumerate(chunks):
        p = tmp_path / f"part{i}.bin"
        p.write_bytes(chunk)
        paths.append(p)
    return paths, hashlib.sha256(b"".join(chunks)).hexdigest()


def test_assemble_concatenates_in_order_checks_the_hash_and_remembers_it(tmp_path):
    paths, sha = parts(tmp_path, [b"GGUF", b"-middle-" * 1000, b"end"])
    target = tmp_path / "cache" / "model.gguf"
    seen = []
    assert local.assemble(paths, target, sha, lambda done, total: seen.append((done, total))) == target
    assert target.read_bytes() == b"GGUF" + b"-middle-" * 1000 + b"end"
    assert seen[-1] == (target.stat().st_size, target.stat().st_size)
    assert json.loads((tmp_path / "cache" / "model.gguf.verified").read_text())["sha256"] == sha
    paths[1].write_bytes(b"changed")  # a verified file is not re-read or re-assembled
    assert local.assemble(paths, target, sha).read_bytes().endswith(b"end") and target.stat().st_size > 8000


def test_a_wrong_hash_leaves_no_file_and_says_how_to_reinstall(tmp_path):
    paths, _ = parts(tmp_path, [b"a", b"b"])
    target = tmp_path / "m.gguf"
    with pytest.raises(ValueError, match="does not match the published.*make install-local"):
        local.assemble(paths, target, "0" * 64)
    assert not target.exists() and not (tmp_path / "m.gguf.partial").exists()
    assert not (tmp_path / "m.gguf.verified").exists()


def test_missing_parts_or_runtime_give_one_line_with_the_install_command(monkeypatch):
    model = local.LocalModel("x", "X", "x.gguf", "0" * 64, parts=("tmem_no_such_part1", "tmem_no_such_part2"))
    with pytest.raises(local.LocalBackendMissing) as exc:
        local.part_paths(model)
    assert "2 of 2 parts missing" in str(exc.value) and "make install-local" in str(exc.value)
    assert "\n" not in str(exc.value)
    real = local.importlib.util.find_spec
    monkeypatch.setattr(local.importlib.util, "find_spec", lambda n, *a: None if n == "xllamacpp" else real(n, *a))
    assert "make install-local" in local.runtime_missing()


def test_ask_with_an_uninstalled_local_model_fails_in_one_line(capsys, tmp_path):
    port = free_port()  # nothing listens: the launcher must look for the (absent) 0.5B parts
    code = cli_main(["ask", "--question", "knowledge_update_1", "--db", str(tmp_path / "t.duckdb"), "--backend",
                     "local", "--local-model", "qwen2.5-coder-0.5b-instruct-q4_k_m", "--local-port", str(port)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and err[0].startswith("error: ")
    assert "local model qwen2.5-coder-0.5b" in err[0] or "xllamacpp" in err[0]  # parts, or the runtime, missing
    assert "make install-local" in err[0] and "Traceback" not in err[0]


# ------------------------------------------------------------------------------------------------- presets
def roles_of(settings: BackendSettings) -> dict[str, str]:
    return {r: settings.role(r).backend for r in ("evidence_utility", "relation", "answer", "judge")}


def test_local_preset_is_hybrid_and_local_all_is_four_roles():
    hybrid = BackendSettings.from_sources({}, {}, {"backend.preset": "local"})
    assert roles_of(hybrid) == {"evidence_utility": "offline", "relation": "offline", "answer": "local",
                                "judge": "local"}
    answer = hybrid.role("answer")
    assert answer.model == LOCAL_MODEL and answer.base_url == f"http://127.0.0.1:{local.DEFAULT_PORT}/v1"
    # timeout 0: each call's timeout follows the server's measured speed, within the floor and the cap
    assert (answer.max_tokens, answer.timeout, answer.retries) == (512, 0.0, 1)
    assert (hybrid.local.timeout_floor, hybrid.local.timeout_cap) == (60.0, 1800.0)
    assert answer.temperature == 0.2  # the paper's decoding stays
    every = BackendSettings.from_sources({}, {}, {"backend.preset": "local-all"})
    assert set(roles_of(every).values()) == {"local"}
    assert every.role("relation").temperature == 0.2 and every.role("evidence_utility").temperature == 0.0


def test_a_roles_own_setting_wins_over_the_preset_and_env_chooses_the_preset():
    s = BackendSettings.from_sources({"TMEM_BACKEND": "local-all", "TMEM_LOCAL_PORT": "18555",
                                      "TMEM_ANSWER_MAX_TOKENS": "64"}, {}, {"roles.relation.backend": "offline"})
    assert roles_of(s)["relation"] == "offline" and roles_of(s)["evidence_utility"] == "local"
    assert s.role("answer").max_tokens == 64 and s.role("answer").base_url == "http://127.0.0.1:18555/v1"
    assert s.local.port == 18555
    with pytest.raises(ValueError, match="expected one of"):
        BackendSettings.from_sources({}, {}, {"backend.preset": "cloud"})


def test_recorded_preset_cannot_mix_with_a_live_role():
    s = BackendSettings.from_sources({}, {}, {"backend.preset": "recorded", "roles.relation.backend": "openai",
                                              "roles.relation.model": "m", "roles.relation.base_url": "http://x/v1"})
    with pytest.raises(ValueError, match="relation cannot be live"):
        build_roles(s, env={})


# ------------------------------------------------------------------------------------------ reply patterns
def test_constant_label_and_confidence_is_reported_and_variety_is_not():
    assert "all 6 relation replies were UPDATE with confidence 0.91" in label_pattern([("UPDATE", 0.91)] * 6,
                                                                                         "relation")
    assert label_pattern([("UPDATE", 0.91)] * 4, "relation") is None  # too few to say anything
    assert label_pattern([("UPDATE", 0.9), ("EXPAND", 0.9)] * 3, "relation").startswith("constant confidence")
    assert label_pattern([("KEY", None)] * 5, "evidence-utility").startswith("constant label")
    assert label_pattern([("UPDATE", 0.9), ("EXPAND", 0.5), ("UPDATE", 0.7)] * 2, "relation") is None


def test_progress_line_gives_an_eta_for_the_rest_of_the_prompt():
    state = {"prompt": 1024, "read": 512, "cached": 300, "generated": 0}
    line = local.progress_line(state, 12.0, 2112, 50.0)
    assert "812/~2,112 tokens read (300 reused" in line and "ETA ~26 s" in line
    assert "writing the reply" in local.progress_line({**state, "generated": 3}, 40.0, 2112, 50.0)


# ---------------------------------------------------------------------------------- record, then replay
def test_record_then_replay_with_no_server_gives_the_same_answers(tmp_path, monkeypatch, capsys):
    """Recording through the scripted server standing in for llama.cpp, then replaying the file with nothing
    listening: the same answers come back; a question that was not recorded is a stale-recording error."""
    server = FaultServer(("reply", scripted_reply))
    port = int(server.base_url.split(":")[2].split("/")[0])
    monkeypatch.setenv("TMEM_LOCAL_PORT", str(port))
    monkeypatch.setattr(local, "ensure_server", lambda options, log=None: None)
    out, db = tmp_path / "rec.json", tmp_path / "rec.duckdb"
    try:
        assert cli_main(["record-demo", "--db", str(db), "--out", str(out), "--questions", "knowledge_update_1",
                         "--no-all-local"]) == 0
    finally:
        server.close()
    rec = recorded.load_recording(out)
    assert [r["question"] for r in rec.runs] == ["knowledge_update_1"] and rec.runs[0]["preset"] == "local"
    assert rec.runs[0]["answers"] == {"forest": "scripted answer", "flat": "scripted answer"}
    # two answers with different prompts; two judge calls with one prompt (the same answer judged twice)
    assert sorted(r["role"] for r in rec.responses.values()) == ["answer", "answer", "judge"]
    assert rec.runs[0]["stages"]["answer"]["calls"] == 2

    monkeypatch.setattr(recorded, "RECORDING", out)
    capsys.readouterr()
    assert cli_main(["ask", "--question", "knowledge_update_1", "--db", str(tmp_path / "replay.duckdb"),
                     "--backend", "recorded"]) == 0
    text = capsys.readouterr().out
    assert "forest answer: scripted answer" in text and rec.label in text and "replayed" in text
    assert cli_main(["ask", "--question", "temporal_2", "--db", str(tmp_path / "replay.duckdb"),
                     "--backend", "recorded"]) == 1
    err = capsys.readouterr().err
    assert "has no reply for answer" in err and "make record-demo" in err


def test_a_rerecording_asks_only_for_the_prompts_the_previous_file_lacks(tmp_path, monkeypatch, capsys):
    """record-demo answers a prompt the previous recording file holds (same key: model, server, role, prompt,
    decoding) from that file, on a fresh database: the model is asked only for what changed; --fresh asks again."""
    server = FaultServer(("reply", scripted_reply))
    port = int(server.base_url.split(":")[2].split("/")[0])
    monkeypatch.setenv("TMEM_LOCAL_PORT", str(port))
    monkeypatch.setattr(local, "ensure_server", lambda options, log=None: None)
    out = tmp_path / "rec.json"

    def record(name: str, *flags: str) -> int:
        """Chat requests one recording sent to the server."""
        before = len(server.requests)
        assert cli_main(["record-demo", "--db", str(tmp_path / f"{name}.duckdb"), "--out", str(out), "--questions",
                         "knowledge_update_1", "--no-all-local", *flags]) == 0
        return len(server.requests) - before

    try:
        first = record("first")
        replies = recorded.load_recording(out).responses
        reused = record("again")  # a fresh database: only the file can answer
        # two answer calls and two judge calls (one prompt, judged twice), every one served by the file
        assert "(4 reused from the previous recording)" in capsys.readouterr().out
        data = json.loads(out.read_text())
        dropped = next(k for k, v in data["responses"].items() if v["role"] == "judge")
        del data["responses"][dropped]
        out.write_text(json.dumps(data))
        one_missing = record("third")
        fresh = record("fresh", "--fresh")
    finally:
        server.close()
    # 3 prompts (two answers, one judge prompt asked twice: 3 or 4 requests as the two judge calls overlap or not)
    assert first >= 3 and fresh >= 3 and reused == 0 and one_missing == 1
    assert recorded.load_recording(out).responses == replies  # the same replies, re-asked or reused


def test_a_malformed_recording_names_the_file_and_field(tmp_path):
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps({"format": 1, "runs": [], "responses": {"k": {"txt": "x"}}}))
    with pytest.raises(ValueError, match=r"r.json: responses\[k…\] has no 'text'"):
        recorded.load_recording(bad)
    with pytest.raises(ValueError, match="no recorded demo here; record one with make record-demo"):
        recorded.load_recording(tmp_path / "absent.json")


@pytest.mark.skipif(not recorded.RECORDING.exists(), reason="no recorded demo in data/ (make record-demo)")
def test_the_shipped_recording_replays_through_todays_pipeline(tmp_path):
    """Every recorded run, replayed with no server through the current pipeline, gives back the recorded answers
    and verdicts. A failure here means the pipeline changed since the recording: re-record with make record-demo."""
    rec = recorded.load_recording()
    assert rec.model in local.MODELS and rec.recorded_at and rec.runs
    store = api.open_store(tmp_path / "replay.duckdb")
    for run in rec.runs:
        preset = {"local": "recorded", "local-all": "recorded-all"}[run["preset"]]
        roles = build_roles(BackendSettings.from_sources({}, {}, {"backend.preset": preset}), store=store, env={})
        question, gold = api.stored_question(store, run["corpus"], run["question"], run["scope"])
        try:
            trace = api.run_and_store(store, run["corpus"], question, run["variant"],
                                      api.resolve_config(run["variant"], run["overrides"]), roles, gold, save=False)
        except recorded.StaleRecording as exc:
            pytest.fail(f"stale recording for {run['question']} ({run['preset']}): {exc}")
        failed = [e for e in trace.errors if "has no reply" in e.message]
        assert not failed, f"stale recording ({failed[0].message}); re-record with {recorded.RECORD_COMMAND}"
        assert {a.presentation: a.text for a in trace.answers} == run["answers"], \
            f"{run['question']}: answers differ from the recording; re-record with {recorded.RECORD_COMMAND}"
        assert {v.presentation: v.correct for v in trace.verdicts} == run["verdicts"]
        assert trace_patterns(trace) == run["patterns"]
        for stage in run["stages"]:
            assert trace.stage(stage).backend.startswith(f"recorded:{rec.model}@")


@pytest.mark.skipif(not recorded.RECORDING.exists(), reason="no recorded demo in data/ (make record-demo)")
def test_the_shipped_recording_covers_every_question_type_and_stays_small():
    """The recorded demo shows at least six curated questions, one of every type, in a small text file."""
    rec = recorded.load_recording()
    hybrid = [r for r in rec.runs if r["preset"] == "local"]
    missing = {"multi_hop", "knowledge_update", "temporal", "user_implicit", "term_ambiguity",
               "abstention"} - {r["type"] for r in hybrid}
    assert len(hybrid) >= 6 and not missing, \
        f"incomplete recording (missing {sorted(missing)}): complete it with {recorded.RECORD_COMMAND}"
    assert recorded.RECORDING.stat().st_size < 200_000


# ------------------------------------------------------------------------------- the launcher, for real
@pytest.mark.slow
@pytest.mark.skipif(llama_server_missing() is not None, reason=llama_server_missing() or "")
def test_launcher_starts_once_reuses_a_running_server_and_serves_the_roles(tmp_path):
    # one llama.cpp thread, as tests/llm_server.py's server: beside the other xdist worker on 2 cores, two threads
    # that spin between ops burnt 14 CPU s in a full run where one costs ~4 s alone (the launcher is what is tested)
    options = local.ServerOptions(model="smollm2-135m-instruct-q4_1", port=free_port(), n_ctx=2048, threads=1)
    server = local.ensure_server(options)
    try:
        assert local.ensure_server(options) is server and not server.reused  # once per process
        assert local.serving(options.port) == [options.model]
        other = local.LocalServer(options).start()  # another process would find it running: reused, not started
        assert other.reused and other.proc is None
        wrong = local.ServerOptions(model=LOCAL_MODEL, port=options.port)
        with pytest.raises(ValueError, match="not qwen2.5"):
            local.LocalServer(wrong).start()
        settings = BackendSettings.from_sources({}, {}, {
            "backend.preset": "local", "local.model": options.model, "local.port": options.port,
            "local.ctx": 2048, "local.threads": 1, "roles.judge.max_tokens": 8})
        roles = build_roles(settings, env={})
        from tmem.prompts import Prompt
        from tmem.types import Question

        result = roles.judge.judge(Question("q", "s", "Which day?"), "Monday", "Monday", Prompt("Judge.", "ok?", ""))
        assert roles.judge.backend.startswith(f"local:{options.model}@http://127.0.0.1:{options.port}/v1")
        assert result.usage.source == "server" and result.usage.prompt_tokens > 0
    finally:
        server.stop()
    assert local.serving(options.port) is None


@pytest.mark.app
@pytest.mark.skipif(not recorded.RECORDING.exists(), reason="no recorded demo in data/ (make record-demo)")
def test_the_app_opens_the_recorded_demo_with_no_server(app, monkeypatch):
    """Settings preset 'recorded': the curated question opens with the local model's recorded answers at once, and
    the sidebar says exactly what produced them."""
    monkeypatch.setenv("TMEM_EMBEDDER", "auto")  # the recording was made with the default embedder
    rec = recorded.load_recording()
    run = next(r for r in rec.runs if r["question"] == "knowledge_update_1" and r["preset"] == "local")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(recorded.RECORDING.parent.parent / "app.py"), default_timeout=180)
    at.session_state["backend_overrides"] = {"backend.preset": "recorded"}
    at.run()
    assert not at.exception
    shown = "\n".join([m.value for m in at.markdown] + [i.value for i in at.info] + [s.value for s in at.success]
                      + [t.value for t in at.text])
    from tmem.viz.safe import md

    assert md(rec.label) in shown and "no server" in shown  # the sidebar escapes it as markdown
    assert not at.error, [e.value for e in at.error]  # e.g. a stale recording: re-record with make record-demo
    # words of the recorded answer that the question does not contain (markdown escaping leaves words intact)
    words = [w for w in re.findall(r"[A-Za-z]{4,}", run["answers"]["forest"])
             if w.lower() not in run["text"].lower()][:6]
    assert words and all(w in shown for w in words)
    assert not [b for b in at.button if b.label == "Run the pipeline"], "the recorded demo opens with its answer"


@pytest.mark.app
def test_settings_page_offers_the_presets_and_applies_one(app, monkeypatch):
    at = app("pages/settings.py")
    radio = at.radio(key="backend-preset")
    text = " | ".join(radio.options)
    assert "local (hybrid)" in text and "all four roles" in text and "offline stand-ins" in text
    radio.set_value(local.backend_presets()["offline"]).run()
    next(b for b in at.button if b.label == "Apply preset").click().run()
    assert not at.exception and at.session_state["backend_overrides"] == {"backend.preset": "offline"}
    assert any("Backend: offline" in i.value for i in at.sidebar.info)
