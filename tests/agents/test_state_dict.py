"""state_dict / load_state_dict / reset over an agent tree: shape, dotted keys, one session."""

from __future__ import annotations

import json
from typing import Any

import pytest
from scripted_llm import scripted

from taskyard.agentkit.agents import (
    Agent,
    AgentDict,
    AgentList,
    SessionValues,
    StateKeys,
    UnknownSessionWarning,
)
from taskyard.agentkit.schema import AgentMessage


class Team(Agent):
    """A composite agent: sub-agents assigned as attributes register themselves."""

    def __init__(self) -> None:
        super().__init__(name="team")
        self.writer = Agent(scripted(), name="writer")
        self.reviewers = AgentList([Agent(scripted(), name="r0"), Agent(scripted(), name="r1")])
        self.experts = AgentDict({"math": Agent(scripted(), name="math")})
        self.experts["math"].helper = Agent(scripted(), name="helper")

    def forward(self, *messages: AgentMessage, session_id: Any = 0, **kw: Any) -> AgentMessage:
        draft = self.writer(*messages, session_id=session_id)
        for reviewer in self.reviewers:
            reviewer(draft, session_id=session_id)  # type: ignore[operator]
        return self.experts["math"].helper(draft, session_id=session_id)  # type: ignore[attr-defined]


KEYS = [
    "memory",
    "writer.memory",
    "reviewers.0.memory",
    "reviewers.1.memory",
    "experts.math.memory",
    "experts.math.helper.memory",
]
EMPTY = {key: [] for key in KEYS}


def unknown_state(agent: Agent, session_id: Any = 0) -> dict[str, Any]:
    """The state of a session the agent does not hold, which warns."""
    with pytest.warns(UnknownSessionWarning, match=f"no session {session_id!r}"):
        return agent.state_dict(session_id)


def test_state_dict_has_dotted_keys_and_plain_json() -> None:
    team = Team()
    team("hello", session_id=5)
    state = team.state_dict(5)
    assert list(state) == KEYS
    assert json.loads(json.dumps(state)) == state
    assert [m["content"] for m in state["writer.memory"]] == ["hello", "echo: hello"]
    assert [m["sender"] for m in state["reviewers.1.memory"]] == ["writer", "r1"]
    assert unknown_state(team, 99) == EMPTY


def test_load_state_dict_restores_a_fresh_tree() -> None:
    team = Team()
    team("hello", session_id=5)
    saved = team.state_dict(5)
    fresh = Team()
    fresh.load_state_dict(saved, session_id="elsewhere")
    assert fresh.state_dict("elsewhere") == saved
    assert unknown_state(fresh, 5) == EMPTY


def test_load_state_dict_refuses_missing_and_unexpected_keys() -> None:
    team = Team()
    state = dict(EMPTY)
    with pytest.raises(KeyError, match=r"missing \['writer.memory'\]"):
        team.load_state_dict({k: v for k, v in state.items() if k != "writer.memory"})
    with pytest.raises(KeyError, match=r"unexpected \['ghost.memory'\]"):
        team.load_state_dict({**state, "ghost.memory": []})


def test_reset_clears_one_session_in_the_whole_tree() -> None:
    team = Team()
    team("a", session_id=1)
    team("b", session_id=2)
    other = team.state_dict(2)
    team.reset(1)
    assert unknown_state(team, 1) == EMPTY
    assert team.state_dict(2) == other
    assert other["writer.memory"] and other["experts.math.helper.memory"]


def test_reassigning_an_attribute_unregisters_the_sub_agent() -> None:
    parent = Agent(scripted())
    parent.child = Agent(scripted())
    assert list(unknown_state(parent)) == ["memory", "child.memory"]
    parent.child = None
    assert list(unknown_state(parent)) == ["memory"]
    parent.other = Agent(scripted())
    del parent.other
    assert list(unknown_state(parent)) == ["memory"]


def test_containers_check_what_they_hold() -> None:
    with pytest.raises(TypeError, match="hold agents"):
        AgentList(["not an agent"])  # type: ignore[list-item]
    with pytest.raises(KeyError, match=r"without '\.'"):
        AgentDict({"a.b": Agent(scripted())})
    agents = AgentList([Agent(scripted())])
    agents.append(Agent(scripted()))
    agents.insert(0, Agent(scripted()))
    del agents[1]
    assert len(agents) == 2
    assert [name for name, _ in agents.named_children()] == ["0", "1"]


def test_state_dict_of_an_unknown_session_warns_once_for_the_tree() -> None:
    team = Team()
    team("hello", session_id=5)
    with pytest.warns(UnknownSessionWarning) as caught:
        team.state_dict(6)
    assert len(caught) == 1
    assert "Team(name='team') has no session 6" in str(caught[0].message)


def test_a_session_held_by_any_memory_of_the_tree_does_not_warn() -> None:
    # Only the writer saw session 3: the session exists (warnings are errors in the suite).
    team = Team()
    team.writer("draft", session_id=3)
    assert team.state_dict(3)["writer.memory"][0]["content"] == "draft"
    assert team.state_dict(3)["memory"] == []


def test_non_strict_load_sets_the_shared_keys_and_reports_the_others() -> None:
    team = Team()
    history = [AgentMessage(content="earlier"), {"sender": "team", "content": "reply"}]
    keys = team.load_state_dict({"memory": history, "ghost.memory": []}, 4, strict=False)
    assert keys == StateKeys(missing=sorted(KEYS[1:]), unexpected=["ghost.memory"])
    assert [m["content"] for m in team.state_dict(4)["memory"]] == ["earlier", "reply"]
    assert team.state_dict(4)["writer.memory"] == []


def test_non_strict_load_on_a_memoryless_agent_leaves_the_history_out() -> None:
    agent = Agent(scripted(), memory=None)
    keys = agent.load_state_dict({"memory": [{"content": "x"}]}, 1, strict=False)
    assert keys == StateKeys(missing=[], unexpected=["memory"])
    assert agent.state_dict(1) == {}


class Planner(Agent):
    """Keeps a round counter per session besides its messages."""

    def __init__(self) -> None:
        super().__init__(name="planner")
        self.notes = SessionValues(round=0, seen=[])
        self.writer = Agent(scripted(), name="writer")
        self.writer.style = SessionValues(tone="plain")

    def forward(self, *messages: AgentMessage, session_id: Any = 0, **kw: Any) -> AgentMessage:
        notes = self.notes.get(session_id)
        notes["round"] += 1
        notes["seen"].append(messages[-1].content)
        return self.writer(*messages, session_id=session_id)


def test_session_values_join_the_state_dict_after_the_memories() -> None:
    planner = Planner()
    planner("a", session_id=1)
    planner("b", session_id=1)
    state = planner.state_dict(1)
    assert list(state) == ["memory", "writer.memory", "notes", "writer.style"]
    assert state["notes"] == {"round": 2, "seen": ["a", "b"]}
    assert state["writer.style"] == {"tone": "plain"}  # the defaults until changed
    state["notes"]["round"] = 99  # a copy: the agent's values do not change
    assert planner.notes.get(1)["round"] == 2


def test_session_values_load_and_reset_per_session() -> None:
    planner = Planner()
    planner("a", session_id=1)
    fresh = Planner()
    fresh.load_state_dict(planner.state_dict(1), session_id=2)
    fresh("b", session_id=2)
    assert fresh.state_dict(2)["notes"] == {"round": 2, "seen": ["a", "b"]}
    fresh.reset(2)
    assert fresh.notes.get(2) == {"round": 0, "seen": []}
    with pytest.raises(KeyError, match=r"missing \['notes'\]"):
        fresh.load_state_dict({k: v for k, v in planner.state_dict(1).items() if k != "notes"})


def test_session_values_must_be_json() -> None:
    planner = Planner()
    planner.notes.get(1)["when"] = object()
    with pytest.raises(TypeError, match="values of session 1 must be JSON"):
        planner.state_dict(1)
    with pytest.raises(TypeError, match="a dict, not list"):
        planner.notes.load([], 1)
    with pytest.raises(TypeError, match="defaults must be JSON"):
        SessionValues(when=object())


def test_a_session_only_values_hold_is_known() -> None:
    planner = Planner()
    planner.notes.get(7)
    assert planner.state_dict(7)["memory"] == []  # no UnknownSessionWarning (an error here)


def test_reassigning_session_values_unregisters_them() -> None:
    planner = Planner()
    planner.notes = None  # type: ignore[assignment]
    del planner.writer.style
    assert list(unknown_state(planner)) == ["memory", "writer.memory"]
