"""Compensators for AgentDojo's tools: undo one call in the benchmark's own environment.

A late verdict's forget rebuilds the agent's state, but the calls the injection made are done:
AgentDojo's environment (a pydantic model the suite's functions change in place) still holds
them. Here each money-moving or message-sending function of the four suites gets a compensator
that undoes one of its calls *in that environment*, so AgentDojo's own checks (an injection
task's ``security()``) see whether the attack's effect is still there after a reconciliation.

=============================== ====================================================================
tool                            compensator (what it undoes in the environment)
=============================== ====================================================================
``send_money``                  ``reverse_payment``: the payment is taken out of the account's
                                transactions (AgentDojo's ``send_money`` does not change the
                                balance, so there is none to restore)
``schedule_transaction``        ``cancel_scheduled_payment``: the scheduled payment is removed
``update_scheduled_transaction`` ``restore_scheduled_payment``: the fields the call set go back
``send_direct_message``         ``delete_direct_message``: the message leaves the recipient's inbox
``send_channel_message``        ``delete_channel_message``: the message leaves the channel
``add_user_to_channel``         ``remove_from_channel``: the user leaves the channel again
``invite_user_to_slack``        ``revoke_invitation``: the invited user is removed
``send_email``                  ``recall_email``: the e-mail leaves the sent folder (and the trash)
``delete_email``                ``restore_email``: the e-mail comes back from the trash
``create_calendar_event``       ``cancel_created_event``: the event is removed and its invitation
                                recalled
``delete_file``                 ``restore_file``: the file comes back to the drive
``share_file``                  ``unshare_file``: the permission the call granted is withdrawn
``reserve_hotel`` / ``_car_rental`` / ``_restaurant``  ``cancel_reservation``: the reservation
                                the call made is replaced by the one before it
=============================== ====================================================================

Every other external function stays without one: what a reconciliation leaves (``report``
items) is what a person must undo. ``update_password`` (a changed password needs a reset by
its owner, not a rollback), ``post_webpage`` (a page posted on someone else's site cannot be
taken back), ``remove_user_from_slack``, ``update_user_info``, ``append_to_file``,
``create_file``, ``reschedule_calendar_event``, ``cancel_calendar_event``,
``add_calendar_event_participants``.

How a compensator finds the call it undoes: the tools of one query run their calls through an
:class:`EffectJournal`, which notes for each compensable call what it made (a transaction's
id, the message object, the before- and after-image of what it overwrote), as the service
itself would keep it (a bank's ledger, a mail server's message ids). The compensator is given
the call's arguments as the forget's report shows them (the forgotten target replaced by its
hash mark, a wildcard here) and undoes the latest journalled call of its tool with matching
arguments that is not undone yet. An effect that is already gone (undone, or overwritten by a
later call) is left as it is; a compensator that finds no such call raises
:class:`NothingToUndo`. What a compensator returns (kept in the call ledger) names ids only,
never a free-text argument: a channel's or a message's text may carry the injection.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["COMPENSATED", "EffectJournal", "NothingToUndo", "Undo", "args_match"]

#: the hash mark a forget's report puts where the forgotten target was
_MARK = re.compile(r"\[erased [^\]]*\]")


class NothingToUndo(LookupError):
    """No call of the tool in this query matches the arguments the compensator was given."""

    def __init__(self, tool: str, args: dict[str, Any]):
        self.tool, self.args = tool, args
        super().__init__(f"no {tool} call of this run matches {sorted(args)}: nothing to undo")


@dataclass(frozen=True)
class Undo:
    """How one tool's call is undone.

    ``name``: the compensator's name. ``capture(env, args)`` runs before the call (what the undo
    needs: ids present, a before-image); ``handle(env, args, captured)`` after it (what the call
    made); ``undo(env, handle) -> str`` undoes it where its effect is still there and says what
    it did (undoing the same handle again finds nothing more to undo).
    """

    name: str
    capture: Callable[[Any, dict[str, Any]], Any]
    handle: Callable[[Any, dict[str, Any], Any], Any]
    undo: Callable[[Any, Any], str]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return float(a) == float(b)
    return a == b


def args_match(shown: Any, raw: Any) -> bool:
    """Whether arguments as a forget's report shows them (``shown``: the target replaced by a hash
    mark, which matches anything) are those a call was made with (``raw``)."""
    if isinstance(shown, dict):
        if not isinstance(raw, dict):
            return False
        return all(args_match(v, raw.get(k)) for k, v in shown.items())
    if isinstance(shown, (list, tuple)):
        return (isinstance(raw, (list, tuple)) and len(shown) == len(raw)
                and all(args_match(s, r) for s, r in zip(shown, raw)))
    if isinstance(shown, str) and _MARK.search(shown):
        pattern = ".*?".join(re.escape(p) for p in _MARK.split(shown))
        return raw is not None and re.fullmatch(pattern, str(raw), re.DOTALL) is not None
    if isinstance(shown, str) and not isinstance(raw, str) and raw is not None:
        try:
            return _same(float(shown), raw)
        except ValueError:
            return shown == str(raw)
    return _same(shown, raw)


# -- banking -----------------------------------------------------------------------------------

def _ids(txs: Iterable[Any]) -> set[int]:
    return {t.id for t in txs}


def _new_ids(attr: str) -> tuple[Callable, Callable]:
    def capture(env: Any, args: dict) -> set[int]:
        return _ids(getattr(env.bank_account, attr))

    def handle(env: Any, args: dict, before: set[int]) -> list[int]:
        return sorted(_ids(getattr(env.bank_account, attr)) - before)

    return capture, handle


def _remove_transactions(attr: str, what: str) -> Callable[[Any, list[int]], str]:
    def undo(env: Any, ids: list[int]) -> str:
        txs = getattr(env.bank_account, attr)
        gone = [t for t in txs if t.id in ids]
        if not gone:
            return f"{what} {ids} already undone"
        txs[:] = [t for t in txs if t.id not in ids]
        return f"{what} {[t.id for t in gone]} undone"

    return undo


_TX_FIELDS = ("recipient", "amount", "subject", "date", "recurring")


def _scheduled(env: Any, tx_id: Any) -> Any:
    return next((t for t in env.bank_account.scheduled_transactions if str(t.id) == str(tx_id)), None)


def _capture_scheduled(env: Any, args: dict) -> dict | None:
    t = _scheduled(env, args.get("id"))
    return None if t is None else {f: getattr(t, f) for f in _TX_FIELDS}


def _handle_scheduled(env: Any, args: dict, before: dict | None) -> tuple:
    t = _scheduled(env, args.get("id"))
    return (args.get("id"), before, None if t is None else {f: getattr(t, f) for f in _TX_FIELDS})


def _restore_scheduled(env: Any, handle: tuple) -> str:
    tx_id, before, after = handle
    t = _scheduled(env, tx_id)
    if t is None or before is None or after is None:
        return f"scheduled payment {tx_id} is gone: nothing to restore"
    restored = [f for f in _TX_FIELDS if before[f] != after[f] and _same(getattr(t, f), after[f])]
    for f in restored:
        setattr(t, f, before[f])
    if not restored:
        return f"scheduled payment {tx_id} already restored"
    return f"scheduled payment {tx_id}: restored {restored}"


# -- slack -------------------------------------------------------------------------------------

def _capture_none(env: Any, args: dict) -> None:
    return None


def _last_message(box: str, key: str) -> Callable[[Any, dict, Any], tuple]:
    def handle(env: Any, args: dict, _: Any) -> tuple:
        name = args.get(key)
        msgs = getattr(env.slack, box).get(name) or []
        return (name, msgs[-1] if msgs else None)

    return handle


def _delete_message(box: str) -> Callable[[Any, tuple], str]:
    def undo(env: Any, handle: tuple) -> str:
        name, msg = handle
        msgs = getattr(env.slack, box).get(name) or []
        kept = [m for m in msgs if m is not msg]
        if len(kept) == len(msgs):
            return "the message is already gone"
        msgs[:] = kept
        return "deleted the message"

    return undo


def _capture_membership(env: Any, args: dict) -> bool:
    return args.get("channel") in env.slack.user_channels.get(args.get("user"), [])


def _handle_membership(env: Any, args: dict, was_member: bool) -> tuple:
    return (args.get("user"), args.get("channel"), was_member)


def _remove_from_channel(env: Any, handle: tuple) -> str:
    user, channel, was_member = handle
    channels = env.slack.user_channels.get(user)
    if was_member or not channels or channel not in channels:
        return "the user is not in the channel by this call: nothing to undo"
    channels.remove(channel)
    return "removed the user from the channel again"


def _capture_user(env: Any, args: dict) -> bool:
    return args.get("user") in env.slack.users


def _handle_user(env: Any, args: dict, existed: bool) -> tuple:
    return (args.get("user"), existed)


def _revoke_invitation(env: Any, handle: tuple) -> str:
    user, existed = handle
    slack = env.slack
    if existed or user not in slack.users:
        return "the user is not in the workspace by this call: nothing to undo"
    slack.users.remove(user)
    slack.user_inbox.pop(user, None)
    slack.user_channels.pop(user, None)
    return "revoked the invitation"


# -- e-mail, calendar, drive (workspace, travel) -------------------------------------------------

def _capture_email_ids(env: Any, args: dict) -> set[str]:
    return set(env.inbox.emails)


def _handle_new_emails(env: Any, args: dict, before: set[str]) -> list[str]:
    return sorted(set(env.inbox.emails) - before)


def _recall(env: Any, ids: Iterable[str]) -> list[str]:
    gone = []
    for i in ids:
        found = env.inbox.emails.pop(i, None)
        found = env.inbox.trash.pop(i, None) or found
        if found is not None:
            gone.append(i)
    return gone


def _recall_email(env: Any, ids: list[str]) -> str:
    gone = _recall(env, ids)
    return f"recalled e-mail {gone}" if gone else f"e-mail {ids} already recalled"


def _handle_deleted(env: Any, args: dict, _: Any) -> str:
    return str(args.get("email_id"))


def _restore_email(env: Any, email_id: str) -> str:
    email = env.inbox.trash.pop(email_id, None)
    if email is None:
        return f"e-mail {email_id} is not in the trash: nothing to restore"
    env.inbox.emails[email_id] = email
    return f"restored e-mail {email_id} from the trash"


def _capture_event_ids(env: Any, args: dict) -> tuple[set[str], set[str]]:
    return set(env.calendar.events), set(env.inbox.emails)


def _handle_new_event(env: Any, args: dict, before: tuple[set[str], set[str]]) -> tuple[list[str], list[str]]:
    events, emails = before
    return sorted(set(env.calendar.events) - events), sorted(set(env.inbox.emails) - emails)


def _cancel_created_event(env: Any, handle: tuple[list[str], list[str]]) -> str:
    events, emails = handle
    gone = [e for e in events if env.calendar.events.pop(e, None) is not None]
    recalled = _recall(env, emails)
    if not gone and not recalled:
        return f"event {events} already removed"
    return f"removed event {gone}, recalled its invitation {recalled}"


def _capture_file(env: Any, args: dict) -> Any:
    return copy.deepcopy(env.cloud_drive.files.get(str(args.get("file_id"))))


def _handle_deleted_file(env: Any, args: dict, before: Any) -> Any:
    return before


def _restore_file(env: Any, file: Any) -> str:
    if file is None or file.id_ in env.cloud_drive.files:
        return "the file is on the drive: nothing to restore"
    env.cloud_drive.files[file.id_] = file
    return f"restored file {file.id_}"


def _capture_share(env: Any, args: dict) -> Any:
    f = env.cloud_drive.files.get(str(args.get("file_id")))
    return None if f is None else f.shared_with.get(args.get("email"))


def _handle_share(env: Any, args: dict, before: Any) -> tuple:
    f = env.cloud_drive.files.get(str(args.get("file_id")))
    return (str(args.get("file_id")), args.get("email"), before,
            None if f is None else f.shared_with.get(args.get("email")))


def _unshare_file(env: Any, handle: tuple) -> str:
    file_id, email, before, granted = handle
    f = env.cloud_drive.files.get(file_id)
    if f is None or granted is None or f.shared_with.get(email) != granted or before == granted:
        return f"file {file_id}: no permission of this call to withdraw"
    if before is None:
        del f.shared_with[email]
    else:
        f.shared_with[email] = before
    return f"file {file_id}: withdrew the permission this call granted"


# -- travel reservations -------------------------------------------------------------------------

def _capture_reservation(env: Any, args: dict) -> Any:
    return env.reservation.model_copy(deep=True)


def _handle_reservation(env: Any, args: dict, before: Any) -> tuple:
    return (before, env.reservation.model_copy(deep=True))


def _cancel_reservation(env: Any, handle: tuple) -> str:
    before, made = handle
    current = env.reservation
    if current != made:
        return "the reservation was replaced since: nothing of this call to cancel"
    for name in type(current).model_fields:
        setattr(current, name, getattr(before, name))
    return "canceled the reservation this call made"


_pay_capture, _pay_handle = _new_ids("transactions")
_sched_capture, _sched_handle = _new_ids("scheduled_transactions")
_RESERVE = Undo("cancel_reservation", _capture_reservation, _handle_reservation, _cancel_reservation)

#: the compensable AgentDojo functions, by name
COMPENSATED: dict[str, Undo] = {
    "send_money": Undo("reverse_payment", _pay_capture, _pay_handle,
                       _remove_transactions("transactions", "payment")),
    "schedule_transaction": Undo("cancel_scheduled_payment", _sched_capture, _sched_handle,
                                 _remove_transactions("scheduled_transactions", "scheduled payment")),
    "update_scheduled_transaction": Undo("restore_scheduled_payment", _capture_scheduled, _handle_scheduled,
                                         _restore_scheduled),
    "send_direct_message": Undo("delete_direct_message", _capture_none, _last_message("user_inbox", "recipient"),
                                _delete_message("user_inbox")),
    "send_channel_message": Undo("delete_channel_message", _capture_none, _last_message("channel_inbox", "channel"),
                                 _delete_message("channel_inbox")),
    "add_user_to_channel": Undo("remove_from_channel", _capture_membership, _handle_membership, _remove_from_channel),
    "invite_user_to_slack": Undo("revoke_invitation", _capture_user, _handle_user, _revoke_invitation),
    "send_email": Undo("recall_email", _capture_email_ids, _handle_new_emails, _recall_email),
    "delete_email": Undo("restore_email", _capture_none, _handle_deleted, _restore_email),
    "create_calendar_event": Undo("cancel_created_event", _capture_event_ids, _handle_new_event,
                                  _cancel_created_event),
    "delete_file": Undo("restore_file", _capture_file, _handle_deleted_file, _restore_file),
    "share_file": Undo("unshare_file", _capture_share, _handle_share, _unshare_file),
    "reserve_hotel": _RESERVE,
    "reserve_car_rental": _RESERVE,
    "reserve_restaurant": _RESERVE,
}


@dataclass
class _Entry:
    tool: str
    args: dict[str, Any]
    handle: Any
    undone: bool = False


@dataclass
class EffectJournal:
    """One query's compensable calls on one AgentDojo environment, and their compensators.

    ``run(name, args, call)`` runs a call (``call()`` returns AgentDojo's ``(result, error)``)
    and journals it when it succeeded and its tool is compensable; ``declare(tool)`` gives a
    LangChain tool of a compensable function its compensator through unsee's public API
    (``declare_effect(tool, "external", compensate=...)``)."""

    env: Any
    undos: dict[str, Undo] = field(default_factory=lambda: dict(COMPENSATED))
    entries: list[_Entry] = field(default_factory=list)

    def run(self, name: str, args: dict[str, Any],
            call: Callable[[], tuple[Any, str | None]]) -> tuple[Any, str | None]:
        undo = self.undos.get(name)
        if undo is None:
            return call()
        captured = undo.capture(self.env, args)
        result, error = call()
        if not error:
            self.entries.append(_Entry(name, copy.deepcopy(dict(args)), undo.handle(self.env, args, captured)))
        return result, error

    def compensator(self, name: str) -> Callable[[dict[str, Any], Any], str]:
        """The compensator of ``name``'s calls: ``fn(args, result)`` (a ``KeyError`` for a tool
        with none)."""
        undo = self.undos[name]

        def compensate(args: dict[str, Any], result: Any) -> str:
            matching = [e for e in self.entries if e.tool == name and args_match(args, e.args)]
            if not matching:
                raise NothingToUndo(name, args)
            todo = [e for e in matching if not e.undone]
            if not todo:
                return f"{name}: already undone"
            entry = todo[-1]
            said = undo.undo(self.env, entry.handle)
            entry.undone = True
            return said

        compensate.__name__ = compensate.__qualname__ = undo.name
        return compensate

    def declare(self, tool: Any) -> Any:
        """``tool`` with its compensator declared (unchanged when its function has none)."""
        if tool.name not in self.undos:
            return tool
        from unsee.plugins.tools import declare_effect

        return declare_effect(tool, "external", compensate=self.compensator(tool.name))
