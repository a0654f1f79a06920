"""The findings list: beside the text on a full-width page, under it in a side column (the Debugger's
inspector), where a seventh of the width cut the "Turn N" label down to "T…"."""

import pytest
from streamlit.testing.v1 import AppTest


def _script(narrow: bool):
    import streamlit as st

    from core.analysis.findings import WARNING, Finding
    from ui.compare_findings import render_findings

    findings = [
        Finding(
            "dominant_message",
            "One message fills 94% of the history.",
            "Responder",
            2,
            None,
            WARNING,
            "A long earlier reply crowds out the rest.",
        )
    ]
    render_findings(
        findings,
        key="f",
        on_turn=lambda n: st.session_state.update(picked=n),
        narrow=narrow,
        name=lambda n: f"turn {n} · 1/2",
        jump_help="Inspect this turn",
    )


@pytest.mark.parametrize("narrow", [False, True])
def test_each_finding_has_a_button_to_its_turn_beside_the_text_or_under_it(narrow):
    at = AppTest.from_function(_script, args=(narrow,), default_timeout=30)
    at.run()
    assert not at.exception, at.exception
    assert len(at.columns) == (0 if narrow else 2)
    [button] = at.button
    assert button.label == "Turn 2 · 1/2" and button.help == "Inspect this turn"
    button.click().run()
    assert at.session_state["picked"] == 2
