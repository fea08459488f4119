"""Data flow through state keys besides ``messages`` is an edge of the provenance graph.

A tool that writes state (deepagents' ``write_file``, ``write_todos``, a custom channel a
``Command`` updates) is recorded as a ``state_write`` artifact; a later tool return or system
prompt that holds its value gets it as a parent. So the target that went into a file and came
back out of it has one source (``locate``), taint covers the read, and a forget reaches it: B7
equals B5 computed independently (every state key compared: ``files``, ``todos``, ``notes``),
and the erasure leaves no copy in unsee's home or the saver's file.

First the linking logic, pure (``middleware.state_flow`` and a hand-built ``ProvenanceGraph``);
then real agents (``agent_shapes.build_state_flow``): each sees a one-turn window, so the turn
that reads the value back never saw the tool result it came from.
"""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from tests.support.agent_shapes import (SECRET, STATE_TURNS, World, build_state_flow, file_copies, run, sqlite_saver,
                          state_flow_reference, state_values)
from unsee import RevocationEvent, Unsee
from unsee.middleware import state_flow
from unsee.middleware.errors import AmbiguousTarget
from unsee.middleware.graph import ProvenanceGraph
from unsee.middleware.records import Artifact, ArtifactType
from unsee.middleware.session_state import SessionState

T = ArtifactType
LOOKUP = f"ticket T1: card {SECRET} on file"


# -- what a tool call wrote ------------------------------------------------------------------
def test_written_reads_a_command_update_and_the_channel_writes_sent_during_the_call():
    cmd = Command(update={"todos": [{"content": "x", "status": "pending"}],
                          "messages": [ToolMessage("ok", tool_call_id="c1")]})
    assert state_flow.written(cmd) == {"todos": [{"content": "x", "status": "pending"}]}
    sent = [("files", {"/a.txt": {"content": "A"}}), ("files", {"/b.txt": {"content": "B"}}),
            ("messages", []), ("__pregel_tasks", 1), ("branch:to:model", None)]
    assert state_flow.written(ToolMessage("ok", tool_call_id="c1"), sent) == {
        "files": {"/a.txt": {"content": "A"}, "/b.txt": {"content": "B"}}}  # (a dict-merge channel)
    assert state_flow.written(Command(update=[("notes", "n1"), ("notes", "n2")])) == {"notes": "n2"}
    assert state_flow.written("plain text") == {}


def test_mark_and_sent_since_take_the_writes_a_tool_appended():
    writes = deque([("files", {"/old": {}})])
    at = (writes, len(writes))
    writes.extend([("files", {"/new": {"content": "x"}})])
    assert state_flow.sent_since(at) == [("files", {"/new": {"content": "x"}})]
    assert state_flow.sent_since(None) == []
    assert state_flow.mark() is None  # outside a LangGraph task


def test_pieces_are_the_significant_lines_of_the_value():
    value = {"content": f"line one is long\n  {LOOKUP}  \nshort\n", "status": "completed", "n": 3}
    assert state_flow.pieces(value) == ("line one is long", LOOKUP)
    assert state_flow.pieces({"name": "Dana", "pin": "4417", "ok": "yes", "state": "pending"}) == ("Dana", "4417")
    many = "\n".join(f"line number {i:05d}" for i in range(5000))
    got = state_flow.pieces(many)
    assert len(got) == state_flow.MAX_PIECES and got[0] == "line number 00000"


def test_slots_keep_the_latest_write_of_each_entry():
    st = SessionState(session_id="s", counter=None)
    state_flow.note(st, "sw1", "files", {"/a.txt": {"content": LOOKUP}, "/b.txt": {"content": "the other file"}})
    state_flow.note(st, "sw2", "files", {"/b.txt": {"content": "replaced the other"}})
    assert st.state_writes["files//a.txt"][0] == "sw1" and st.state_writes["files//b.txt"][0] == "sw2"
    assert state_flow.reads(st, f"1  {LOOKUP}") == ["sw1"]  # (a read_file gutter around it)
    assert state_flow.reads(st, "the other file") == []  # overwritten: no longer in state
    state_flow.note(st, "sw3", "files", {"/a.txt": None})  # deleted
    assert state_flow.reads(st, LOOKUP) == []
    state_flow.note(st, "sw4", "todos", [{"content": f"call back: {LOOKUP}", "status": "pending"}])
    assert state_flow.reads(st, f"- call back: {LOOKUP} (pending)") == ["sw4"]
    assert state_flow.reads(st, "all items completed") == []  # (a status word is no evidence)


def test_a_rebuilt_state_reads_its_writes_back_from_the_vault():
    arts = [Artifact(id="sw1", session_id="s", type=T.STATE_WRITE, seq=1, attrs={"key": "notes"})]
    st = SessionState.rebuild("s", None, arts, [])
    assert st.state_writes_unloaded == [("sw1", "notes")] and state_flow.has_writes(st)

    class Store:
        def content(self, session, aid):
            return json.dumps(LOOKUP) if (session, aid) == ("s", "sw1") else None

    class Rec:
        store = Store()

    state_flow.load(Rec(), st)
    assert state_flow.reads(st, LOOKUP) == ["sw1"] and not st.state_writes_unloaded


# -- the graph: one source, taint through the state ----------------------------------------
def _a(aid, type_, seq, parents=(), source=()):
    return Artifact(id=aid, session_id="s", type=type_, seq=seq, step=seq, parents=tuple(parents),
                    source_ids=tuple(source))


def _file_session(edge: bool):
    """lookup -> the model writes its result to a file; a later turn (which saw only its own
    input) reads the file back and answers with it."""
    arts = [
        _a("in1", T.USER_INPUT, 1, source=["user"]),
        _a("mt1", T.MODEL_TURN, 2, ["in1"]),
        _a("c1", T.TOOL_CALL, 3, ["mt1"]),
        _a("tr1", T.TOOL_RETURN, 4, ["c1"], ["tool:lookup"]),
        _a("mt2", T.MODEL_TURN, 5, ["in1", "mt1", "tr1"]),
        _a("c2", T.TOOL_CALL, 6, ["mt2"]),
        _a("tr2", T.TOOL_RETURN, 7, ["c2"], ["tool:write_file"]),
        _a("sw", T.STATE_WRITE, 8, ["c2"], ["state:files"]),
        _a("in2", T.USER_INPUT, 9, source=["user"]),
        _a("mt3", T.MODEL_TURN, 10, ["in2"]),
        _a("c3", T.TOOL_CALL, 11, ["mt3"]),
        _a("tr3", T.TOOL_RETURN, 12, ["c3", "sw"] if edge else ["c3"], ["tool:read_file"]),
        _a("mt4", T.MODEL_TURN, 13, ["in2", "mt3", "tr3"]),
        _a("rep4", T.REPLY, 14, ["mt4"]),
    ]
    contents = {"in1": "look at T1 and save it", "tr1": LOOKUP, "c2": json.dumps({"content": LOOKUP}),
                "sw": json.dumps({"/notes.txt": {"content": LOOKUP}}), "tr2": "Updated file /notes.txt",
                "in2": "what did I save?", "c3": '{"file_path": "/notes.txt"}', "tr3": f"1  {LOOKUP}",
                "mt4": f"Your notes: {LOOKUP}", "rep4": f"Your notes: {LOOKUP}"}
    return ProvenanceGraph(arts, content_of=contents.get)


def test_a_read_of_state_is_derived_from_its_write():
    g = _file_session(edge=True)
    assert g.entry_sources(SECRET) == ["tool:lookup"]
    hit = g.locate(SECRET)
    assert hit.artifact_id == "tr1"
    closure = g.taint(hit)
    assert {"sw", "tr3", "mt4", "rep4"} <= closure
    assert not g.independent("mt4", closure) and g.independent("mt3", closure)


def test_without_the_edge_the_read_is_a_second_source():
    g = _file_session(edge=False)
    assert g.entry_sources(SECRET) == ["tool:lookup", "tool:read_file"]
    assert "tr3" not in g.taint(g.locate(SECRET))


def test_a_state_write_the_tool_filled_itself_is_where_the_target_entered():
    arts = [
        _a("in1", T.USER_INPUT, 1, source=["user"]),
        _a("mt1", T.MODEL_TURN, 2, ["in1"]),
        _a("c1", T.TOOL_CALL, 3, ["mt1"]),
        _a("tr1", T.TOOL_RETURN, 4, ["c1"], ["tool:save_ticket"]),
        _a("sw", T.STATE_WRITE, 5, ["c1"], ["state:notes"]),
        _a("sw2", T.STATE_WRITE, 6, ["c1", "sw"], ["state:notes"]),  # (an edit: carries the old text on)
        _a("c2", T.TOOL_CALL, 7, ["mt1"]),
        _a("tr2", T.TOOL_RETURN, 8, ["c2", "sw2"], ["tool:read_saved"]),
    ]
    contents = {"c1": '{"ticket": "T1"}', "tr1": "Saved.", "sw": json.dumps(LOOKUP),
                "sw2": json.dumps(LOOKUP + " (edited)"), "c2": "{}", "tr2": LOOKUP}
    g = ProvenanceGraph(arts, content_of=contents.get)
    assert g.entry_sources(SECRET) == ["state:notes"]
    hit = g.locate(SECRET)
    assert (hit.artifact_id, hit.artifact_type, hit.source_ids) == ("sw", T.STATE_WRITE, ("state:notes",))
    assert g.taint(hit) == {"sw", "sw2", "tr2"}
    assert g.locate(SECRET, source="state:notes").artifact_id == "sw"


def test_a_tool_that_returns_a_record_and_keeps_it_in_state_is_one_source():
    arts = [
        _a("c1", T.TOOL_CALL, 1),
        _a("tr1", T.TOOL_RETURN, 2, ["c1"], ["tool:fetch"]),
        _a("sw", T.STATE_WRITE, 3, ["c1", "tr1"], ["state:notes"]),
        _a("c2", T.TOOL_CALL, 4),
        _a("tr2", T.TOOL_RETURN, 5, ["c2", "sw"], ["tool:read_saved"]),
    ]
    contents = {"c1": '{"ticket": "T1"}', "tr1": LOOKUP, "sw": json.dumps(LOOKUP), "c2": "{}", "tr2": LOOKUP}
    g = ProvenanceGraph(arts, content_of=contents.get)
    assert g.entry_sources(SECRET) == ["tool:fetch"]
    assert g.taint(g.locate(SECRET)) == {"tr1", "sw", "tr2"}


def test_a_system_prompt_built_from_state_depends_on_the_write():
    arts = [
        _a("c1", T.TOOL_CALL, 1),
        _a("sw", T.STATE_WRITE, 2, ["c1"], ["state:todos"]),
        _a("sys", T.PROMPT_BLOCK, 3, ["sw"], ["system_prompt"]),
        _a("in2", T.USER_INPUT, 4, source=["user"]),
        _a("mt", T.MODEL_TURN, 5, ["sys", "in2"]),
    ]
    g = ProvenanceGraph(arts, content_of={"c1": LOOKUP, "sw": LOOKUP, "sys": "todos: " + LOOKUP}.get)
    assert not g.independent("mt", g.taint("sw"))


# -- real agents ----------------------------------------------------------------------------
class Session:
    """``kind`` of ``build_state_flow`` recorded on thread "s" (a SQLite saver in ``tmp``), and
    its B5 computed independently."""

    def __init__(self, tmp: Path, kind: str):
        self.tmp, self.kind = tmp, kind
        self.u = Unsee(home=tmp / "home")
        self.world = World()
        self.app = build_state_flow(kind, self.world, middleware=lambda: [self.u.middleware()],
                                    checkpointer=sqlite_saver(tmp / "live.sqlite"))
        run(self.app, "s", STATE_TURNS)
        self.ref, _ = state_flow_reference(kind, STATE_TURNS, sqlite_saver(tmp / "ref.sqlite"))

    def graph(self):
        return self.u.graph("s")

    def of(self, type_: ArtifactType, tool: str | None = None) -> list[Artifact]:
        return [a for a in self.graph() if a.type is type_ and (tool is None or a.attrs.get("tool") == tool)]

    def forget_is_b5(self) -> None:
        before = state_values(self.app, "s")
        assert SECRET in json.dumps(before)
        report = self.u.forget("s", RevocationEvent(target=SECRET))
        assert report.committed and report.errors == []
        now = state_values(self.app, "s")
        assert now == self.ref  # every key: messages, files / todos / notes
        assert SECRET not in json.dumps(now)
        assert report.erased_clean is True
        assert file_copies([self.tmp / "home", *self.tmp.glob("live.sqlite*")], SECRET) == {}
        assert not [a for a in self.graph() if SECRET in (self.graph().content(a.id) or "")]


def test_a_file_written_then_read_back_has_one_source_and_is_forgotten(tmp_path):
    s = Session(tmp_path, "files")
    (sw,) = s.of(T.STATE_WRITE)
    assert sw.attrs["key"] == "files" and sw.source_ids == ("state:files",)
    (write_call,) = [a for a in s.of(T.TOOL_CALL) if a.attrs.get("tool") == "write_file"]
    (write_return,) = s.of(T.TOOL_RETURN, "write_file")
    assert sw.parents == (write_call.id, write_return.id)
    (read,) = s.of(T.TOOL_RETURN, "read_file")
    assert sw.id in read.parents and SECRET in s.graph().content(read.id)
    g = s.graph()
    assert g.entry_sources(SECRET) == ["tool:lookup"]
    hit = g.locate(SECRET)
    assert g.get(hit.artifact_id).attrs.get("tool") == "lookup"
    assert {sw.id, read.id} <= g.taint(hit)
    s.forget_is_b5()
    assert state_values(s.app, "s")["files"] == {"/notes.txt": "ticket T1: card  on file"}
    (sw2,) = s.of(T.STATE_WRITE)  # the counterfactual's write, recorded by the replay
    assert SECRET not in s.graph().content(sw2.id)


def test_a_todo_list_shown_in_the_system_prompt_is_a_read_of_the_write(tmp_path):
    s = Session(tmp_path, "todos")
    (sw,) = s.of(T.STATE_WRITE)
    assert sw.attrs["key"] == "todos"
    g = s.graph()
    prompts = [a for a in s.of(T.PROMPT_BLOCK) if SECRET in (g.content(a.id) or "")]
    assert prompts and all(a.parents == (sw.id,) for a in prompts)
    assert g.entry_sources(SECRET) == ["tool:lookup"]
    closure = g.taint(g.locate(SECRET))
    assert {sw.id, *(a.id for a in prompts)} <= closure
    answer = next(a for a in g.of_type(T.MODEL_TURN) if "Saved:" in (g.content(a.id) or ""))
    assert not g.independent(answer.id, closure)
    s.forget_is_b5()


def test_a_custom_channel_a_tool_filled_itself_is_the_entry(tmp_path):
    s = Session(tmp_path, "channel")
    (sw,) = s.of(T.STATE_WRITE)
    g = s.graph()
    assert (sw.attrs["key"], g.content(sw.id)) == ("notes", json.dumps(LOOKUP))
    (read,) = s.of(T.TOOL_RETURN, "read_saved")
    assert sw.id in read.parents
    assert g.entry_sources(SECRET) == ["state:notes"]
    hit = g.locate(SECRET)
    assert hit.artifact_id == sw.id and read.id in g.taint(hit)
    s.forget_is_b5()


def test_a_process_that_goes_on_with_the_session_links_to_writes_it_did_not_record(tmp_path):
    """The writes of earlier runs are read back from the vault by a new process's recorder."""
    saver_path = tmp_path / "live.sqlite"
    u1 = Unsee(home=tmp_path / "home")
    app1 = build_state_flow("files", World(), middleware=lambda: [u1.middleware()],
                            checkpointer=sqlite_saver(saver_path))
    run(app1, "s", STATE_TURNS[:3])
    u1.flush()
    u2 = Unsee(home=tmp_path / "home")
    app2 = build_state_flow("files", World(), middleware=lambda: [u2.middleware()],
                            checkpointer=sqlite_saver(saver_path))
    run(app2, "s", STATE_TURNS[3:])
    g = u2.graph("s")
    (sw,) = [a for a in g if a.type is T.STATE_WRITE]
    (read,) = [a for a in g if a.type is T.TOOL_RETURN and a.attrs.get("tool") == "read_file"]
    assert sw.id in read.parents
    assert g.entry_sources(SECRET) == ["tool:lookup"]


def test_without_state_edges_the_file_read_would_be_ambiguous(tmp_path, monkeypatch):
    """The control: the same session recorded with no read edges names two sources."""
    monkeypatch.setattr(state_flow, "reads", lambda st, text: [])
    s = Session(tmp_path, "files")
    with pytest.raises(AmbiguousTarget):
        s.u.forget("s", RevocationEvent(target=SECRET), dry_run=True)


def test_a_replay_links_its_reads_to_writes_before_the_fork(tmp_path):
    """A target that enters after the file was written: the write is in the clean prefix, the
    read in the replayed suffix; the replay's recorder reads the prefix's write back (the fork's
    records) and the committed graph keeps the edge."""
    later = "blender broken"  # (turn 3's lookup, after turn 2 saved T1 to the file)
    s = Session(tmp_path, "files")
    report = s.u.forget("s", RevocationEvent(target=later))
    assert report.committed and report.errors == [] and report.checkpoint_id is not None
    g = s.graph()
    (sw,) = [a for a in g if a.type is T.STATE_WRITE]
    (read,) = s.of(T.TOOL_RETURN, "read_file")
    assert g.get(sw.id).turn == 2 and sw.id in read.parents
    assert later not in json.dumps(state_values(s.app, "s"))
    assert SECRET in state_values(s.app, "s")["files"]["/notes.txt"]  # (not this forget's target)


def test_a_later_state_write_that_brought_the_target_in_again_is_an_entry_too():
    """The target came from a lookup, and later a tool copied the same record into state itself:
    two sources; with ``source=`` the first, the replay removes it from both."""
    from unsee.plugins.forget.plan import observed_entries

    arts = [
        _a("c1", T.TOOL_CALL, 1),
        _a("tr1", T.TOOL_RETURN, 2, ["c1"], ["tool:lookup"]),
        _a("c2", T.TOOL_CALL, 3),
        _a("sw", T.STATE_WRITE, 4, ["c2"], ["state:notes"]),
        _a("c3", T.TOOL_CALL, 5, ["c1"]),  # (the model copied the lookup into its call)
        _a("sw3", T.STATE_WRITE, 6, ["c3"], ["state:other"]),
    ]
    contents = {"c1": '{"ticket": "T1"}', "tr1": LOOKUP, "c2": '{"ticket": "T1"}', "sw": json.dumps(LOOKUP),
                "c3": json.dumps(LOOKUP), "sw3": json.dumps(LOOKUP)}
    g = ProvenanceGraph(arts, content_of=contents.get)
    assert g.entry_sources(SECRET) == ["tool:lookup", "state:notes"]
    hit = g.locate(SECRET, source="tool:lookup")
    assert observed_entries(g, SECRET, hit, "tool:lookup") == {"tr1", "sw"}  # (sw3 is derived: its call held it)


def test_erasing_the_subject_reaches_the_state_writes(tmp_path):
    """The written values are recorded texts like any other: a subject's erasure leaves no copy
    in unsee's home or the saver's file."""
    s = Session(tmp_path, "files")
    g = s.graph()
    assert any(SECRET in (g.content(a.id) or "") for a in g if a.type is T.STATE_WRITE)
    result = s.u.erase_subject(threads=["s"], targets=[SECRET], agent=s.app)
    assert result.clean
    assert file_copies([tmp_path / "home", *tmp_path.glob("live.sqlite*")], SECRET) == {}


def test_a_long_line_is_matched_by_windows_a_clipped_read_still_holds():
    st = SessionState(session_id="s", counter=None)
    long_line = "x" * 300 + LOOKUP + "y" * 5000
    state_flow.note(st, "sw1", "files", {"/big.json": {"content": long_line}})
    clipped = long_line[:400] + "... (clipped)"
    assert state_flow.reads(st, clipped) == ["sw1"]


def test_an_edited_value_reads_the_write_it_carries_on():
    """A write whose value holds an earlier write's text (an edited file) is derived from it,
    compared as text, not as the JSON it is recorded as (which escapes quotes)."""
    st = SessionState(session_id="s", counter=None)
    quoted = f'note: "{LOOKUP}"'
    state_flow.note(st, "sw1", "files", {"/a.txt": {"content": quoted}})
    edited = {"/a.txt": {"content": quoted + "\nand one more line"}}
    assert state_flow.reads(st, state_flow.plain(edited)) == ["sw1"]
    assert state_flow.reads(st, state_flow.as_json(edited)) == []  # (why: the JSON escapes the quotes)


@pytest.mark.parametrize("step", ["replay:turn:", "commit:state", "commit:records", "erase:"])
def test_a_crash_leaves_the_old_files_or_the_counterfactual_ones(tmp_path, step):
    """The safety contract on the new keys: a crash anywhere leaves the old state or B5 (files
    included), and the retry reaches B5."""
    from unsee.middleware.errors import InjectedCrash
    from unsee.middleware.faults import crash_at

    s = Session(tmp_path, "files")
    before = state_values(s.app, "s")
    with crash_at(step), pytest.raises(InjectedCrash):
        s.u.forget("s", RevocationEvent(target=SECRET, event_id="ev-1"))
    assert state_values(s.app, "s") in (before, s.ref)
    report = s.u.forget("s", RevocationEvent(target=SECRET, event_id="ev-1"))
    assert report.committed and state_values(s.app, "s") == s.ref


def test_many_pieces_against_a_long_text_find_the_same_slots_by_anchors(monkeypatch):
    """Past the scan budget, the text's substrings pick the slots to scan: the same answer."""
    st = SessionState(session_id="s", counter=None)
    for f in range(40):
        state_flow.note(st, f"sw{f}", "files", {f"/f{f}.txt": {"content": "\n".join(
            f"file {f} line {i} of the notes" for i in range(60))}})
    state_flow.note(st, "short", "pin", "4417")  # (a piece shorter than an anchor: always scanned)
    text = "\n".join(f"unrelated output line {i}" for i in range(300)) + "\n12  file 7 line 33 of the notes\npin 4417"
    monkeypatch.setattr(state_flow, "DIRECT_BUDGET", 10 ** 12)
    direct = state_flow.reads(st, text)
    monkeypatch.setattr(state_flow, "DIRECT_BUDGET", 0)
    assert state_flow.reads(st, text) == direct == ["sw7", "short"]
