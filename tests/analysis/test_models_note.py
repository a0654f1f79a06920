"""On a flow's first use the Debugger says which model answers and how to use a real one."""

from core.analysis.debug_view import models_note


def test_before_the_first_turn_it_names_the_flows_models_and_the_stand_in():
    note = models_note({"LLM (1)": "openai/gpt-3.5-turbo", "Classifier": "openai/gpt-3.5-turbo"})
    assert note.startswith(
        "This flow's nodes call openai/gpt-3.5-turbo. A node whose provider key is not in the environment"
    )
    assert models_note({"Responder": "memlens/demo"}) is None  # the demo model by design: nothing to say


def test_after_the_first_turn_it_says_whom_the_demo_model_answered_for_why_and_how_to_use_the_real_one():
    runs = [
        {
            "node_id": "1",
            "title": "LLM",
            "model": "openai/gpt-3.5-turbo",
            "model_called": "memlens/demo",
            "notes": ["openai/gpt-3.5-turbo: OPENAI_API_KEY is not set — ran on memlens/demo"],
        },
        {"node_id": "2", "title": "Start", "model": None, "model_called": None, "notes": []},
    ]
    note = models_note({"LLM": "openai/gpt-3.5-turbo"}, runs)
    assert note.startswith(
        "The offline demo model memlens/demo answered for LLM (openai/gpt-3.5-turbo: "
        "OPENAI_API_KEY is not set — ran on memlens/demo)."
    )
    assert "set its provider's key in the environment" in note and "Model for new turns" in note
    own = [dict(runs[0], model_called="openai/gpt-3.5-turbo", notes=[])]
    assert models_note({"LLM": "openai/gpt-3.5-turbo"}, own) is None
