"""The `/gpu` grammar (DESIGN §9): command text -> a typed Command. Pure; shared by Slack and CLI.

Runbook names, their `/gpu` verbs and their node-typed inputs come in as plain data
(`RunbookSyntax`), so this module never reads the catalog or the database. Every refusal is a
UserInputError that names what was wrong and what is valid. Incident ids are checked for
shape here; whether the incident exists is the caller's lookup (`reporting.read_incident`).
"""

from __future__ import annotations

import html
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from bot.errors import UserInputError
from bot.intake.windows import parse_window as parse_window  # re-exported
from integrations.errors import InvalidName
from integrations.names import check_node_name

_KEY = re.compile(r"^[a-z_][a-z0-9_]*$")
_INCIDENT = re.compile(r"^(?:inc-?)?(\d{1,9})$", re.IGNORECASE)
DEFAULT_WINDOW = "7d"
MAX_COMMAND_CHARS = 4096
"""Longest `/gpu` command text (and longest CLI KEY=VALUE input); node ranges such as
`gpu-node-[000-511]` name many nodes in a few characters."""
MAX_INPUTS = 32
"""Most key=value inputs one command may give a runbook."""


@dataclass(frozen=True)
class RunbookSyntax:
    """What the grammar needs to know of one runbook."""

    name: str
    target_input: str | None = None
    node_inputs: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Diagnose:
    node: str


@dataclass(frozen=True)
class RunRunbook:
    runbook: str
    inputs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ListIncidents:
    include_resolved: bool = False


@dataclass(frozen=True)
class ShowIncident:
    incident_id: int


@dataclass(frozen=True)
class Ack:
    incident_id: int


@dataclass(frozen=True)
class Postmortem:
    incident_id: int


@dataclass(frozen=True)
class Mttr:
    window: timedelta
    label: str
    by: str = "runbook"  # runbook | layer | week


@dataclass(frozen=True)
class FiredAt:
    """`fired <id> <time> [reason]`: a person dates the start of impact."""

    incident_id: int
    when: datetime | time  # aware UTC, or a UTC clock time on the incident's detection day
    reason: str = ""


@dataclass(frozen=True)
class Note:
    incident_id: int
    text: str


@dataclass(frozen=True)
class Pin:
    """`pin <id> <event>` / `unpin <id> <event>`."""

    incident_id: int
    event_id: int
    pinned: bool = True


@dataclass(frozen=True)
class Resolve:
    incident_id: int
    reason: str


@dataclass(frozen=True)
class ListRunbooks:
    pass


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Breaker:
    """`breaker status` / `breaker reset [reason]`: the circuit breaker of node removals."""

    action: str  # status | reset
    reason: str = ""


@dataclass(frozen=True)
class PauseActions:
    """`pause <reason>`: no action that changes the cluster runs until `resume`."""

    reason: str


@dataclass(frozen=True)
class ResumeActions:
    """`resume`: end every pause request in force."""


@dataclass(frozen=True)
class Classify:
    """`classify [INC-N] <pasted text>`: the tool outputs and logs in the text, judged as
    `gpu-oncall triage-bundle` judges them; with an incident, the answer goes on its timeline."""

    text: str
    incident_id: int | None = None


@dataclass(frozen=True)
class ActionItem:
    """`action <id> @owner [due YYYY-MM-DD] <text>`: a postmortem action item."""

    incident_id: int
    owner: str
    text: str
    due: date | None = None


@dataclass(frozen=True)
class Section:
    """`section <id> <name> <text>`: a postmortem prose section in a person's words."""

    incident_id: int
    section: str  # one of POSTMORTEM_SECTIONS, with _ (went_well), as storage names them
    text: str


Command = (
    Diagnose
    | RunRunbook
    | ListIncidents
    | ShowIncident
    | Ack
    | Postmortem
    | Mttr
    | FiredAt
    | Note
    | Pin
    | Resolve
    | ListRunbooks
    | Help
    | Breaker
    | PauseActions
    | ResumeActions
    | Classify
    | ActionItem
    | Section
)

USAGE: tuple[tuple[str, str], ...] = (
    ("diagnose <node>", "sweep every layer of one node (node-diagnose)"),
    ("run <runbook> [key=value ...]", "run any runbook, e.g. run ecc-storm node=gpu-node-03"),
    ("incidents [all]", "open incidents (all: include resolved)"),
    ("incident <id>", "one incident: state, verdict, MTTR figures, latest events"),
    ("ack <id>", "acknowledge an incident"),
    (
        "fired <id> <time> [reason]",
        "when impact began (UTC: 14:05, 14:05:30 or 2026-11-24T14:05Z); MTTx follow",
    ),
    ("note <id> <text>", "add a note to the incident's timeline"),
    ("pin <id> <event>", "pin a timeline event (#number from incident <id>) into the story"),
    ("unpin <id> <event>", "take a timeline event out of the pinned story"),
    ("resolve <id> <reason>", "resolve an incident by hand, saying why"),
    ("postmortem <id>", "upload the incident's postmortem (HTML) to this channel"),
    (
        "action <id> @owner [due YYYY-MM-DD] <text>",
        "add a postmortem action item with its owner and due date",
    ),
    (
        "section <id> <name> <text>",
        "write a postmortem section in your words (summary, impact, root-cause, contributing, "
        "went-well, went-badly); drafts never replace it",
    ),
    (
        "mttr [window] [by runbook|layer|week]",
        f"MTTD / MTTA / time to diagnosis / MTTM / MTTR, p50 and p90 (default {DEFAULT_WINDOW})",
    ),
    (
        "classify [INC-N] <pasted output>",
        "judge pasted nvidia-smi / dcgmi / ibstat / kubectl / kernel / NCCL output; "
        "with INC-N it goes on that incident's timeline",
    ),
    ("runbooks", "list runbooks and their triggers"),
    ("pause <reason>", "stop every action that changes the cluster until resume (approvers)"),
    ("resume", "end the pause (approvers)"),
    ("breaker status|reset [reason]", "the circuit breaker of cordons/drains; reset: approvers"),
    ("help", "this list"),
)
"""The grammar, in the order `help` shows it."""

VERBS = (
    "diagnose",
    "run",
    "incidents",
    "incident",
    "ack",
    "fired",
    "note",
    "pin",
    "unpin",
    "resolve",
    "postmortem",
    "action",
    "section",
    "mttr",
    "runbooks",
    "pause",
    "resume",
    "breaker",
    "classify",
    "help",
)


def parse_command(text: str, *, runbooks: Sequence[RunbookSyntax] = ()) -> Command:
    """Parse the text after `/gpu`. Empty text means help."""
    if len(text) > MAX_COMMAND_CHARS:
        raise UserInputError(
            f"the command has {len(text)} characters; at most {MAX_COMMAND_CHARS} "
            "(use node ranges such as gpu-node-[000-511] for many nodes)"
        )
    if _CLASSIFY.match(text):
        return parse_classify(text)
    words = _split(text)
    if not words:
        return Help()
    verb, args = words[0].lower(), words[1:]
    simple = _simple(verb, args)
    if simple is not None:
        return simple
    if verb == "diagnose":
        return Diagnose(node=_node(_one(verb, args, "<node>"), where="diagnose"))
    if verb == "run":
        if not args:
            raise UserInputError(f"/gpu run needs a runbook (runbooks: {_names(runbooks)})")
        syntax = _runbook(args[0], runbooks)
        return RunRunbook(runbook=args[0], inputs=_inputs(args[1:], syntax))
    for syntax in runbooks:
        if verb in syntax.verbs:
            return _runbook_verb(verb, args, syntax)
    raise UserInputError(f"unknown command '{verb}' (commands: {', '.join(_all_verbs(runbooks))})")


def _simple(verb: str, args: list[str]) -> Command | None:
    """The verbs whose arguments need no runbook knowledge."""
    if verb == "help":
        return Help()
    if verb == "runbooks":
        _none(verb, args)
        return ListRunbooks()
    if verb == "incidents":
        if args and [a.lower() for a in args] != ["all"]:
            raise UserInputError(
                f"/gpu incidents takes no argument or 'all', not '{' '.join(args)}' "
                "(for one incident: /gpu incident INC-42)"
            )
        return ListIncidents(include_resolved=bool(args))
    if verb in ("incident", "ack", "postmortem"):
        incident_id = parse_incident_id(_one(verb, args, "<id>"))
        if verb == "ack":
            return Ack(incident_id)
        return ShowIncident(incident_id) if verb == "incident" else Postmortem(incident_id)
    if verb == "mttr":
        return _mttr(args)
    if verb in _HUMAN_VERBS:
        return _human(verb, args)
    if verb in ("action", "section"):
        return _postmortem_text(verb, args)
    if verb in ("breaker", "pause", "resume"):
        return _safety(verb, args)
    return None


_CLASSIFY = re.compile(r"^\s*classify(?:\s|$)", re.IGNORECASE)
_CLASSIFY_INCIDENT = re.compile(r"^inc-?\d{1,9}$", re.IGNORECASE)


def parse_classify(text: str) -> Classify:
    """`classify [INC-N] <text>`: the text is taken as pasted, never split into words (shell
    quoting rules would break on a log line's quotes). Only the `INC-N` form names an incident,
    so pasted output that starts with a number is not mistaken for one."""
    rest = html.unescape(_CLASSIFY.sub("", text, count=1)).strip()  # Slack escapes & < >
    head = rest.split(None, 1)[0] if rest else ""
    incident_id = None
    if _CLASSIFY_INCIDENT.match(head):
        incident_id = parse_incident_id(head)
        rest = rest[len(head) :].strip()
    if not rest:
        raise UserInputError(
            "/gpu classify needs the text to judge: /gpu classify [INC-42] <pasted nvidia-smi -q, "
            "dcgmi diag, ibstat, kubectl describe node, kernel or NCCL output> (or share the file "
            "in the incident's thread)"
        )
    return Classify(text=rest, incident_id=incident_id)


MTTR_GROUPS = ("runbook", "layer", "week")
"""How `mttr` groups incidents."""
_HUMAN_VERBS = ("fired", "note", "pin", "unpin", "resolve")
_EVENT = re.compile(r"^#?(\d{1,12})$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?$")


def _mttr(args: list[str]) -> Mttr:
    """`mttr [window] [by runbook|layer|week]`, in either order."""
    words = [a.lower() for a in args]
    by = "runbook"
    if "by" in words:
        at = words.index("by")
        if at + 1 >= len(words) or words[at + 1] not in MTTR_GROUPS:
            raise UserInputError(f"/gpu mttr by takes one of {', '.join(MTTR_GROUPS)}")
        by = words[at + 1]
        del words[at : at + 2]
    if len(words) > 1:
        raise UserInputError(
            f"/gpu mttr takes one window such as 7d or 24h and 'by runbook|layer|week', "
            f"not '{' '.join(args)}'"
        )
    label = words[0] if words else DEFAULT_WINDOW
    return Mttr(window=parse_window(label), label=label, by=by)


def _human(verb: str, args: list[str]) -> Command:
    """The verbs by which a person puts something on an incident's record."""
    shapes = {
        "fired": "<id> <time> [reason]",
        "note": "<id> <text>",
        "pin": "<id> <event>",
        "unpin": "<id> <event>",
        "resolve": "<id> <reason>",
    }
    if len(args) < 2:
        raise UserInputError(f"/gpu {verb} takes {shapes[verb]} (e.g. /gpu {verb} INC-42 ...)")
    incident_id, rest = parse_incident_id(args[0]), args[1:]
    if verb == "fired":
        return FiredAt(incident_id, parse_when(rest[0]), " ".join(rest[1:]))
    if verb == "note":
        return Note(incident_id, " ".join(rest))
    if verb == "resolve":
        return Resolve(incident_id, " ".join(rest))
    if len(rest) != 1:
        got = " ".join(rest)
        raise UserInputError(f"/gpu {verb} takes {shapes[verb]}: one event number (got '{got}')")
    return Pin(incident_id, parse_event_id(rest[0]), pinned=verb == "pin")


POSTMORTEM_SECTIONS = (
    "summary", "impact", "root_cause", "contributing", "went_well", "went_badly"
)  # fmt: skip
"""The prose sections a person may write (bot/incidents/drafting.py's PROSE_SECTIONS)."""
_OWNER = re.compile(r"^(?:<@([UW][A-Z0-9]{1,20})(?:\|[^>]*)?>|@([\w.-]{1,80}))$")


def _postmortem_text(verb: str, args: list[str]) -> ActionItem | Section:
    """`action <id> @owner [due YYYY-MM-DD] <text>` and `section <id> <name> <text>`."""
    if verb == "action":
        if len(args) < 3:
            raise UserInputError(
                "/gpu action takes <id> @owner [due YYYY-MM-DD] <text> "
                "(e.g. /gpu action INC-42 @alice due 2026-12-01 add an ECC alert)"
            )
        incident_id, owner, rest = parse_incident_id(args[0]), parse_owner(args[1]), args[2:]
        due = None
        if rest[0].lower() == "due":
            if len(rest) < 3:
                raise UserInputError("/gpu action ... due YYYY-MM-DD <text>: the text is missing")
            due, rest = parse_due(rest[1]), rest[2:]
        return ActionItem(incident_id, owner, " ".join(rest), due)
    if len(args) < 3:
        raise UserInputError(
            f"/gpu section takes <id> <name> <text> (names: {_section_names()}; "
            "e.g. /gpu section INC-42 summary GPU 5 of gpu-node-03 failed)"
        )
    return Section(parse_incident_id(args[0]), parse_section(args[1]), " ".join(args[2:]))


def parse_owner(text: str) -> str:
    """`@alice` or a Slack mention `<@U0ALICE>` -> `@alice` / `U0ALICE`."""
    match = _OWNER.match(text.strip())
    if match is None:
        raise UserInputError(
            f"'{text}' is not an owner: name one person as @alice (or mention them)"
        )
    return match.group(1) or "@" + match.group(2)


def parse_due(text: str) -> date:
    """`YYYY-MM-DD` -> a date."""
    wrong = f"due date '{text}' is not YYYY-MM-DD (e.g. 2026-12-01)"
    if _DATE.match(text) is None:
        raise UserInputError(wrong)
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise UserInputError(wrong) from None


def parse_section(text: str) -> str:
    """`went-well`, `went_well` or `Went-Well` -> `went_well`; others name the valid ones."""
    name = text.strip().lower().replace("-", "_")
    if name not in POSTMORTEM_SECTIONS:
        raise UserInputError(f"unknown postmortem section '{text}' (sections: {_section_names()})")
    return name


def _section_names() -> str:
    return ", ".join(s.replace("_", "-") for s in POSTMORTEM_SECTIONS)


_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def parse_event_id(text: str) -> int:
    """`#17` or `17` -> 17: the number `incident <id>` shows beside each timeline event."""
    match = _EVENT.match(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise UserInputError(
            f"'{text}' is not a timeline event number (#17 or 17, as `incident <id>` lists them)"
        )
    return int(match.group(1))


def parse_when(text: str) -> datetime | time:
    """A time in UTC: ISO 8601 with a zone (`2026-11-24T14:05Z`, `...+02:00`), ISO without one
    (read as UTC), or a clock time `14:05` / `14:05:30` (UTC, on a day the caller picks)."""
    clock = _CLOCK.match(text.strip())
    if clock is not None:
        hour, minute, second = (int(g) if g else 0 for g in clock.groups())
        if hour > 23 or minute > 59 or second > 59:
            raise UserInputError(f"'{text}' is not a time of day (00:00 to 23:59:59, UTC)")
        return time(hour, minute, second, tzinfo=UTC)
    try:
        parsed = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise UserInputError(
            f"'{text}' is not a time (UTC: 14:05, 14:05:30, or 2026-11-24T14:05Z)"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def on_day_of(when: datetime | time, reference: datetime) -> datetime:
    """`parse_when`'s result as an aware UTC datetime: a clock time falls on `reference`'s UTC
    day (the incident's detection day; for impact that began the day before, give the date)."""
    if isinstance(when, datetime):
        return when
    day = reference.astimezone(UTC).date()
    return datetime.combine(day, when.replace(tzinfo=None), tzinfo=UTC)


def _safety(verb: str, args: list[str]) -> Command:
    """`breaker status|reset [reason]`, `pause <reason>`, `resume`: the safety switches."""
    if verb == "pause":
        if not args:
            raise UserInputError("/gpu pause needs a reason, e.g. /gpu pause firmware rollout")
        return PauseActions(reason=" ".join(args))
    if verb == "resume":
        _none(verb, args)
        return ResumeActions()
    action = args[0].lower() if args else ""
    if action not in ("status", "reset") or (action == "status" and len(args) > 1):
        raise UserInputError("/gpu breaker takes status or reset [reason]: /gpu breaker status")
    return Breaker(action=action, reason=" ".join(args[1:]))


def parse_incident_id(text: str) -> int:
    """`INC-42`, `inc-42` or `42` -> 42."""
    match = _INCIDENT.match(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise UserInputError(
            f"'{text}' is not an incident id (use INC-42 or 42; /gpu incidents lists them)"
        )
    return int(match.group(1))


def parse_pairs(pairs: Iterable[str], *, where: str = "input") -> dict[str, str]:
    """`key=value` words -> a dict, for `/gpu run` and `gpu-oncall run` alike. Malformed pairs,
    bad keys, repeated keys and over-long pairs are refused."""
    pairs = list(pairs)
    if len(pairs) > MAX_INPUTS:
        raise UserInputError(f"{len(pairs)} {where}s given; at most {MAX_INPUTS}")
    inputs: dict[str, str] = {}
    for pair in pairs:
        if len(pair) > MAX_COMMAND_CHARS:
            raise UserInputError(
                f"{where} '{pair[:40]}...' has {len(pair)} characters; at most "
                f"{MAX_COMMAND_CHARS} (use node ranges such as gpu-node-[000-511] for many nodes)"
            )
        key, sep, value = pair.partition("=")
        if not sep or not _KEY.match(key) or not value:
            raise UserInputError(
                f"{where} '{pair}' is not key=value (e.g. node=gpu-node-07 window=30m; "
                "keys are lower-case letters, digits and _)"
            )
        if key in inputs:
            raise UserInputError(f"{where} '{key}' is given twice")
        inputs[key] = value
    return inputs


def _runbook_verb(verb: str, args: list[str], syntax: RunbookSyntax) -> RunRunbook:
    """`/gpu ecc gpu-node-03 window=30m`: a runbook's own verb; a bare first word is its target."""
    if not syntax.target_input:
        return RunRunbook(syntax.name, _inputs(args, syntax))
    if not args or "=" in args[0]:
        raise UserInputError(f"/gpu {verb} needs a {syntax.target_input}: /gpu {verb} <target>")
    inputs = {syntax.target_input: args[0], **parse_pairs(args[1:])}
    return RunRunbook(syntax.name, _checked(inputs, syntax))


def _inputs(args: list[str], syntax: RunbookSyntax | None) -> dict[str, str]:
    inputs = parse_pairs(args)
    return _checked(inputs, syntax) if syntax else inputs


def _checked(inputs: dict[str, str], syntax: RunbookSyntax) -> dict[str, str]:
    for key in syntax.node_inputs & set(inputs):
        inputs[key] = _node(inputs[key], where=f"{syntax.name}: input '{key}'")
    return inputs


def _runbook(name: str, runbooks: Sequence[RunbookSyntax]) -> RunbookSyntax | None:
    if not runbooks:
        return None
    for syntax in runbooks:
        if syntax.name == name:
            return syntax
    raise UserInputError(f"unknown runbook '{name}' (runbooks: {_names(runbooks)})")


def _node(text: str, *, where: str) -> str:
    try:
        return check_node_name(text)
    except InvalidName as exc:
        raise UserInputError(f"{where}: {exc}") from exc


def _one(verb: str, args: list[str], what: str) -> str:
    if len(args) != 1:
        got = "nothing" if not args else f"'{' '.join(args)}'"
        raise UserInputError(f"/gpu {verb} takes one argument, {what} (got {got})")
    return args[0]


def _none(verb: str, args: list[str]) -> None:
    if args:
        raise UserInputError(f"/gpu {verb} takes no arguments (got '{' '.join(args)}')")


def _split(text: str) -> list[str]:
    # Slack escapes &, < and > in command text, and phones type curly quotes.
    plain = html.unescape(text).replace("\u201c", '"').replace("\u201d", '"')
    try:
        return shlex.split(plain.replace("\u2018", "'").replace("\u2019", "'"))
    except ValueError as exc:
        raise UserInputError(f"cannot read the command: {exc} (close every quote)") from exc


def _names(runbooks: Sequence[RunbookSyntax]) -> str:
    return ", ".join(sorted(s.name for s in runbooks)) or "none loaded"


def _all_verbs(runbooks: Sequence[RunbookSyntax]) -> list[str]:
    extra = sorted({v for s in runbooks for v in s.verbs} - set(VERBS))
    return [*VERBS, *extra]
