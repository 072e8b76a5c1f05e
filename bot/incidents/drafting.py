"""The publishable sections of a postmortem, drafted from the record (pure: no I/O imports):
summary, impact, root cause and contributing factors, what went well and badly, action items.

Every sentence is derived from the incident, its story and its timeline, never invented; what
the record does not hold is said to be unknown. What went well or badly compares each MTTx
figure with the team's targets (`TARGETS`) and reads the timeline (approvals expired or
rejected, actions failed, verification). Action items start as drafts from the follow-ups,
unassigned and undated. Markdown, HTML and JSON render the same `Sections`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import timedelta
from typing import Any

from bot.incidents.mttr import DEFINITIONS, MttrFigures, TimestampOrderError, format_duration
from bot.incidents.story import Story, follow_ups, verifications
from bot.incidents.views import EventView, IncidentView

TARGETS: Mapping[str, timedelta] = {
    "mttd": timedelta(minutes=5),
    "mtta": timedelta(minutes=15),
    "time_to_diagnosis": timedelta(minutes=1),
    "mttm": timedelta(minutes=30),
    "mttr": timedelta(hours=4),
}
"""The team's target for each figure (mttr.DEFINITIONS names): within it went well."""


@dataclass(frozen=True)
class ActionItem:
    """A follow-up someone owns: `owner` and `due` are unset in a draft."""

    text: str
    owner: str | None = None
    due: str | None = None  # ISO date
    draft: bool = True


@dataclass(frozen=True)
class Sections:
    summary: str
    impact: tuple[str, ...]
    root_cause: str
    contributing: tuple[str, ...]
    went_well: tuple[str, ...]
    went_badly: tuple[str, ...]
    action_items: tuple[ActionItem, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["action_items"] = [asdict(item) for item in self.action_items]
        return data


PROSE_SECTIONS = ("summary", "impact", "root_cause", "contributing", "went_well", "went_badly")
"""Sections a person may write (`gpu-oncall postmortem-edit`); their text replaces the draft."""


def draft_sections(incident: IncidentView, story: Story, events: Sequence[EventView]) -> Sections:
    """The sections as the record tells them (see the module docstring); a section a person
    wrote (`story.written`) is theirs, and recorded action items come before the drafts."""
    figures = _figures(incident)
    drafted = Sections(
        summary=_summary(incident, story),
        impact=tuple(_impact(incident, story, events, figures)),
        root_cause=_root_cause(incident, story),
        contributing=tuple(_contributing(story)),
        went_well=tuple(_went(figures, well=True) + _well_from_timeline(events, story)),
        went_badly=tuple(_went(figures, well=False) + _badly_from_timeline(events, story)),
        action_items=(
            *(ActionItem(text, owner, due, draft=False) for text, owner, due in story.action_items),
            *(ActionItem(text) for text in follow_ups(incident, story, events)),
        ),
    )
    return _with_written(drafted, story.written)


def _with_written(drafted: Sections, written: Mapping[str, str]) -> Sections:
    changes: dict[str, Any] = {}
    for name, text in written.items():
        if name not in PROSE_SECTIONS:
            continue
        current = getattr(drafted, name)
        changes[name] = (text,) if isinstance(current, tuple) else text
    return replace(drafted, **changes)


def _figures(incident: IncidentView) -> MttrFigures | None:
    try:
        return incident.figures()
    except TimestampOrderError:
        return None


def _summary(incident: IncidentView, story: Story) -> str:
    verdict = str(story.verdict.get("summary") or "")
    where = f"{incident.runbook} on {incident.target}"
    found = verdict or (
        f"localized to {incident.layer}" if incident.layer else "no fault was localized"
    )
    state = f"the incident is {incident.state}"
    return f"{incident.ref} ({incident.severity}, {where}): {found}; {state}."


def _impact(
    incident: IncidentView,
    story: Story,
    events: Sequence[EventView],
    figures: MttrFigures | None,
) -> list[str]:
    lines = []
    duration = figures.mttr if figures else None
    lines.append(
        f"Duration (fired to resolved): {format_duration(duration)}"
        if duration
        else "Duration: unknown (not resolved, or nobody said when impact began)"
    )
    lost = next((x.value for x in story.extra_figures if x.label == "GPU-hours lost"), None)
    lines.append(f"GPU-hours lost: {lost or 'unknown'}")
    jobs = _jobs(events)
    lines += [
        f"Job {name}: {job.get('ranks_lost', '?')} of {job.get('ranks_total', '?')} ranks, "
        f"{job.get('gpus_lost', '?')} of {job.get('gpus_total', '?')} GPUs on the culprit node"
        for name, job in sorted(jobs.items())
    ] or ["Jobs: none recorded on the culprit nodes"]
    lines.append("Users: the owners of the jobs above (the record names no users)")
    return lines


def _jobs(events: Sequence[EventView]) -> dict[str, Mapping[str, Any]]:
    """Each job an approval's impact named, with its largest loss."""
    jobs: dict[str, Mapping[str, Any]] = {}
    for event in events:
        if event.kind != "approval_requested":
            continue
        for proposal in event.payload.get("proposals", []) or []:
            impact = proposal.get("impact") if isinstance(proposal, Mapping) else None
            for job in (impact or {}).get("jobs", []) or []:
                name = job.get("job")
                if isinstance(name, str):
                    jobs[name] = max(
                        (jobs.get(name, {}), job), key=lambda j: int(j.get("gpus_lost") or 0)
                    )
    return jobs


def _root_cause(incident: IncidentView, story: Story) -> str:
    findings = story.verdict.get("findings") or []
    first = next((f for f in findings if isinstance(f, Mapping)), None)
    if first is None:
        return f"Not determined: {incident.layer or 'no verdict'}; no finding fired."
    culprits = ", ".join(incident.culprits) or "no culprit"
    return f"{first.get('summary')} (layer {first.get('layer')}; culprit {culprits})."


def _contributing(story: Story) -> list[str]:
    findings = [f for f in story.verdict.get("findings") or [] if isinstance(f, Mapping)]
    lines = [f"Side finding: {f.get('summary')}" for f in findings[1:]]
    lines += [f"Signal missing during diagnosis: {s}" for s in story.missing_signals()]
    for detector in story.verdict.get("detectors") or []:
        if isinstance(detector, Mapping):
            lines.append(f"Detector gap: {detector.get('text') or detector.get('summary')}")
    lines += [f"Layer not judged: {layer}" for layer in story.verdict.get("unknown_layers") or []]
    return lines or ["None recorded."]


def _went(figures: MttrFigures | None, *, well: bool) -> list[str]:
    if figures is None:
        return [] if well else ["The figures could not be computed (timestamps out of order)."]
    lines = []
    for d in DEFINITIONS:
        value: timedelta | None = getattr(figures, d.name)
        target = TARGETS.get(d.name)
        if value is None or target is None:
            continue
        within = value <= target
        if within == well:
            verb = "within" if within else "over"
            lines.append(
                f"{d.label} {format_duration(value)}: {verb} the {format_duration(target)} target"
            )
    return lines


def _well_from_timeline(events: Sequence[EventView], story: Story) -> list[str]:
    lines = []
    if any(e.kind == "verification_passed" for e in verifications(events)):
        lines.append("The fix was verified by the signal that showed the fault.")
    if story.actions and all(a.status == "succeeded" for a in story.actions):
        lines.append("Every approved action succeeded.")
    return lines


def _badly_from_timeline(events: Sequence[EventView], story: Story) -> list[str]:
    lines = [
        f"Approval {a.state}: {a.reason or a.step_id}"
        for a in story.approvals
        if a.state in ("expired", "rejected")
    ]
    failed = [a for a in story.actions if a.status == "failed"]
    lines += [f"{a.action} on {a.target} failed: {a.detail}" for a in failed]
    if any(e.kind == "verification_failed" for e in verifications(events)):
        lines.append("A verification failed: the fault outlived the first fix.")
    return lines
