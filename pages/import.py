"""Import real conversations: upload a transcript, a MemLens export or a report bundle, and store it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.errors import MemLensError
from core.io import FORMATS, MAX_IMPORT_BYTES, UPLOAD_EXTENSIONS, FormatError, formats
from core.limits import check_file_size
from core.service import import_upload
from core.words import conversation_length, plural
from ui import state as keys
from ui.compare_source import database
from ui.data import service
from ui.entry import through_app
from ui.html import plain
from ui.pull_form import render_pull_form

through_app()  # before anything is shown or read: the login is in app.py

P = keys.IMPORT
MODES = {"all": "Import nothing (all or nothing)", "skip": "Skip the bad records and import the rest"}
state = st.session_state


def _problems_frame(problems: list[dict]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "record": p.get("record"),
                "conversation": p.get("conversation") or "",
                "field": p.get("field") or "",
                "problem": p.get("message") or "",
            }
            for p in problems
        ]
    )


def _open_in_debugger(conversation_id: str) -> None:
    state[keys.OPEN_IN_DEBUGGER] = conversation_id  # the debugger opens it, whatever its source filter


def _open_in_compare(conversation_id: str) -> None:
    state[keys.OPEN_IN_COMPARE] = conversation_id  # Compare opens it (it owns its widgets)


st.title("Import conversations")
st.caption(
    "Replay your own production logs: upload a conversation file and it is stored, whole or not at all, "
    "ready to inspect in the Debugger and on the Compare and Present pages. Malformed records are named by "
    "record and field. A Dify DSL export (YAML) is a flow, not a conversation: start a conversation on it "
    "with *New conversation* in the Debugger's sidebar."
)

file_tab, dify_tab = st.tabs(["From a file", "From a Dify app"])

with file_tab, st.expander("Supported formats"):
    rows = [{"format": f.name, "what": f.description} for f in formats()]
    rows.append(
        {
            "format": "memlens-conversation",
            "what": "a MemLens conversation export (with its flow and node runs), stored under its own ids",
        }
    )
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")

with file_tab:
    upload = st.file_uploader(
        f"Conversation file (JSON, JSON Lines, an n8n chat history table as CSV or an "
        f"Agents SDK session database, up to {MAX_IMPORT_BYTES // 1048576} MB)",
        type=list(UPLOAD_EXTENSIONS),
        key=f"{P}_file",
    )
    left, right = st.columns(2)
    fmt = left.selectbox(
        "Format",
        ["detect"] + FORMATS,
        key=f"{P}_format",
        format_func=lambda f: "detect from the file" if f == "detect" else f,
    )
    user = right.text_input("User id for the imported conversations", "user", key=f"{P}_user")
    mode = st.radio("When a record is malformed", list(MODES), key=f"{P}_mode", format_func=MODES.get, horizontal=True)

    if upload is None:
        state.pop(keys.result(P), None)
    elif st.button("Import", key=f"{P}_go", type="primary"):
        bar = st.progress(0.0, text="Reading…")

        def progress(done: int, total: int) -> None:
            share = done / total if total else 1.0
            bar.progress(min(1.0, share), text=f"Reading… {done / 1048576:.1f} of {total / 1048576:.1f} MB")

        try:
            check_file_size(upload.size, upload.name)  # before the bytes are read, let alone parsed
            outcome = import_upload(
                database(),
                upload.getvalue(),
                upload.name,
                fmt=None if fmt == "detect" else fmt,
                skip_bad=mode == "skip",
                on_progress=progress,
                user_id=user.strip() or "user",
            )
        except MemLensError as e:
            bar.progress(1.0, text="Stopped: nothing was stored")
            problems = [p.to_json() for p in getattr(e, "problems", [])] if isinstance(e, FormatError) else []
            state[keys.result(P)] = {"ok": False, "file": upload.name, "message": str(e), "problems": problems}
        else:
            bar.progress(1.0, text="Done")
            state[keys.result(P)] = {
                "ok": True,
                "file": upload.name,
                "summary": outcome.summary,
                "ids": outcome.ids,
                "format": outcome.format,
                "saved": outcome.saved_configs,
                "problems": [p.to_json() for p in outcome.problems],
                "notes": outcome.notes,
            }

    result = state.get(keys.result(P))
    if result and upload is not None and result["file"] == upload.name:
        if not result["ok"]:
            st.error(plain(result["message"]))
            st.warning("Nothing was stored.")
            if result["problems"]:
                st.markdown("**Problems, by record and field**")
                st.dataframe(_problems_frame(result["problems"]), hide_index=True, width="stretch")
        else:
            st.success(plain(f"Imported {result['summary']}."))
            for note in result["notes"]:
                st.info(plain(f"Note: {note}."))
            if result["saved"]:
                st.info(plain(f"Its configs are saved as the config set “{result['saved']}” on the Compare page."))
            if result["problems"]:
                st.markdown(f"**Left out: {plural(len({p['record'] for p in result['problems']}), 'bad record')}**")
                st.dataframe(_problems_frame(result["problems"]), hide_index=True, width="stretch")
            stored = {c.id: c for c in service().conversations()}
            listed = [
                {"conversation": stored[i].name, "turns": conversation_length(stored[i]), "id": i}
                for i in result["ids"]
                if i in stored
            ]
            st.dataframe(pd.DataFrame(listed), hide_index=True, width="stretch")
            which = "it" if len(listed) == 1 else "the first one"
            if listed and st.button(
                f"Open {which} in the debugger", key=f"{P}_debug", on_click=_open_in_debugger, args=(listed[0]["id"],)
            ):
                st.switch_page("pages/debugger.py")
            if listed and st.button(
                f"Compare {which}", key=f"{P}_compare", on_click=_open_in_compare, args=(listed[0]["id"],)
            ):
                st.switch_page("pages/compare.py")

with dify_tab:
    render_pull_form(database(), key=f"{P}_pull")
