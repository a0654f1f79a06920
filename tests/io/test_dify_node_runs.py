"""A Dify workflow run's node executions, as Dify's console lists them: each node that called a model
(an LLM node, a Question Classifier) saved the prompt it sent in ``process_data.prompts``, read as
that call's conversation with its reply; the other nodes are left out with a note."""

from __future__ import annotations

import json

import pytest

from core.io import FormatError, detect_format, import_text


def llm_run(run_id="exec-2", **extra) -> dict:
    return {
        "id": run_id,
        "index": 2,
        "predecessor_node_id": "start",
        "node_id": "llm",
        "node_type": "llm",
        "title": "LLM",
        "inputs": {},
        "status": "succeeded",
        "error": None,
        "elapsed_time": 1.2,
        "created_at": 1746090001,
        "finished_at": 1746090002,
        "process_data": {
            "model_mode": "chat",
            "model_provider": "openai",
            "model_name": "gpt-4o-mini",
            "prompts": [
                {"role": "system", "text": "You help with orders.", "files": []},
                {"role": "user", "text": "Hi, I'm Dana.", "files": []},
                {"role": "assistant", "text": "Hello Dana!", "files": []},
                {"role": "user", "text": "What's my name?", "files": []},
            ],
        },
        "outputs": {"text": "Dana.", "usage": {"total_tokens": 40}, "finish_reason": "stop"},
        **extra,
    }


def other_run(node_type: str, run_id: str) -> dict:
    return {
        "id": run_id,
        "node_id": node_type,
        "node_type": node_type,
        "title": node_type.title(),
        "process_data": None,
        "inputs": {"sys.query": "What's my name?"},
        "outputs": {},
    }


def page(*runs) -> str:
    return json.dumps({"data": list(runs)})


def test_an_llm_nodes_saved_prompt_is_its_call_and_the_other_nodes_are_left_out_with_a_note():
    doc = {"data": [other_run("start", "exec-1"), llm_run(), other_run("answer", "exec-3")]}
    assert detect_format(doc) == "dify-node-runs"
    result = import_text(json.dumps(doc), name="node-executions.json")
    [conv] = result.conversations
    assert (conv.id, conv.system_prompt, conv.source_format) == ("exec-2", "You help with orders.", "dify-node-runs")
    assert conv.name == "LLM · 2025-05-01 09:00:01"  # the time to the second, in UTC, as every call is named
    assert [(t.query, t.answer) for t in conv.turns] == [("Hi, I'm Dana.", "Hello Dana!"), ("What's my name?", "Dana.")]
    assert (conv.meta["node_id"], conv.meta["model"], conv.meta["provider"]) == ("llm", "gpt-4o-mini", "openai")
    assert result.notes == [
        "left out the node runs that sent no prompt (1 answer, 1 start): only a node that calls a model saves one"
    ]


def test_older_dify_keeps_the_process_data_as_json_text():
    run = llm_run()
    run["process_data"] = json.dumps(run["process_data"])
    conv = import_text(page(run), name="runs.json").conversations[0]
    assert conv.turns[-1].answer == "Dana."


def test_a_question_classifier_call_has_its_prompt_and_no_text_reply():
    run = llm_run(node_type="question-classifier", title="Classify", outputs={"class_name": "order"})
    conv = import_text(page(run), name="runs.json").conversations[0]
    assert conv.turns[-1].query == "What's my name?" and conv.turns[-1].answer_index is None


def test_a_run_without_a_model_call_is_refused_in_one_line():
    with pytest.raises(FormatError, match="holds no node run with a prompt, only 1 start") as e:
        import_text(page(other_run("start", "exec-1")), name="runs.json")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "process_data,problem",
    [
        ("{not json", "'process_data' is not valid JSON"),
        ({"prompts": "hi there", "model_name": "x"}, None),  # a completion model's prompt text reads as one query
        ({"prompts": 5}, "'process_data.prompts' is not a prompt"),
    ],
)
def test_process_data_read_or_refused_naming_it(process_data, problem):
    text = page(llm_run(process_data=process_data if not isinstance(process_data, str) else "prompts " + process_data))
    if problem is None:
        assert import_text(text, name="runs.json").conversations[0].turns[0].query == "hi there"
        return
    with pytest.raises(FormatError, match=problem):
        import_text(text, name="runs.json")
