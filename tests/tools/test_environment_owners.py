"""SessionEnvironments records which session owns each environment (its replay
shadows included), so a later process can find every snapshot a session stored."""

from __future__ import annotations

import json
import uuid

from unsee.plugins.tools import SessionEnvironments
from unsee.sandbox import environment_items, open_environment, read_item


def make_envs(tmp_path):
    def factory():
        return open_environment("local", root=tmp_path / "sandboxes" / uuid.uuid4().hex[:8], keep=True)

    return SessionEnvironments(factory, lambda s, env: env.write_file("ticket.txt", f"ticket of {s}"),
                               registry=tmp_path / "sandboxes" / "registry.json")


def test_owners_snapshots_of_and_live_env(tmp_path):
    se = make_envs(tmp_path)
    a = se.env("A")
    se.env("B")
    a.write_file("secret.txt", b"SECRET")
    k1 = se.snapshot_for_thread("A")
    shadow = se.begin_replay("A-scratch", "A", se._initial["A"])
    k2 = se.snapshot_for_thread("A-scratch")  # the scratch thread's snapshots are A's
    se.end_replay("A-scratch", commit=True)

    mine = se.snapshots_of("A")
    assert {s.env_id for s in mine} == {a.env_id, shadow.env_id}
    assert {k1, k2, se._initial["A"], se._latest["A"]} <= {str(s) for s in mine}
    assert not {s.env_id for s in se.snapshots_of("B")} & {a.env_id, shadow.env_id}
    assert se.snapshots_of("nobody") == []
    assert se.live_env_id("A") == shadow.env_id and se.live_env_id("nobody") is None
    assert str(se.initial_snapshot("A")) == se._initial["A"] and se.latest_snapshot("A").env_id == shadow.env_id
    data = json.loads(se.registry.read_text())
    assert data["owners"] == {a.env_id: "A", se._envs["B"].env_id: "B", shadow.env_id: "A"}
    # the retired pre-forget environment's stored copies, found from its snapshot alone
    old = next(s for s in mine if s.env_id == a.env_id)
    assert any(b"SECRET" in d for i in environment_items(old) if i.kind == "workspace" for _, d in read_item(i))
    se.close()

    # a later process: nothing open, the registry says it all
    later = make_envs(tmp_path)
    assert sorted(map(str, later.snapshots_of("A"))) == sorted(str(s) for s in se.snapshots_of("A"))
    assert later.live_env_id("A") == shadow.env_id  # where its latest state came from

    keys = [str(s) for s in later.snapshots_of("A")]
    later.drop_snapshots(keys)
    left = {str(s) for s in later.snapshots_of("A")}
    assert left == {later._initial["A"], later._latest["A"]}  # never the initial/latest
    assert {str(s) for s in make_envs(tmp_path).snapshots_of("A")} == left  # saved
    later.close()


def test_a_registry_without_owners_still_loads(tmp_path):
    se = make_envs(tmp_path)
    env = se.env("A")
    se.snapshot_for_thread("A")
    se.close()
    data = json.loads(se.registry.read_text())
    del data["owners"]
    se.registry.write_text(json.dumps(data))
    old = make_envs(tmp_path)
    assert {s.env_id for s in old.snapshots_of("A")} == {env.env_id}  # from its initial/latest
    assert old.live_env_id("A") == env.env_id
