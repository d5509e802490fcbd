"""`python -m tmem demo`: a deterministic generator of realistic multi-party project chat in the GroupMemBench
layout (paper App. A.1), with questions of the six GroupMemBench types, gold answers and gold evidence units.

Each domain is one memory scope: 6-12 people with roles, three project channels with three topics each, five
phases per channel (stage, phase_order, phase_progress), six weeks of working-hours bursts. Decisions on a
(component, aspect) pair evolve: proposed, discussed, confirmed, questioned, revised or rolled back, amid
interleaved chatter, status pings and look-alike messages from other episodes.

Knowledge-update questions are built so that the T-Mem mechanism visibly matters (Sec. 4.2-4.3, App. G.1): the
decisive update uses none of the question's words (BM25 ranks it low) but replies, within hours and in the same
topic, to a challenge that several high-BM25 messages discuss (temporal discovery recovers it); it carries a
revision cue ("instead", "no longer", "roll back", ...) and repeats the earlier value, so an UPDATE edge links it
to the earlier state. Only `random.Random` seeded per domain (string seeds hash with SHA-512, not `hash()`), no
set iteration, floats rounded to two decimals: the output is byte-identical across runs and machines.
"""
from __future__ import annotations

import argparse
import html
import json
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from tmem.types import Gold, Message, Question

if TYPE_CHECKING:  # tmem.store pulls in duckdb and pandas; `python -m tmem demo --help` stays fast
    from tmem.store import CorpusData

CURATED_QUESTION = ("Technology", "knowledge_update_1")
QUESTION_TYPES = ("multi_hop", "knowledge_update", "temporal", "user_implicit", "term_ambiguity", "abstention")
ABSTENTION = "There is no information available in the conversation to answer this question."
START, DAYS = datetime(2025, 3, 3, 9, 0), 42  # a Monday; six weeks
PHASES = ("Scoping", "Solution Design", "Build & Integration", "Pilot", "Rollout & Handover")
STAGES = (1, 1, 2, 2, 3)
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "data" / "demo.jsonl"

# ------------------------------------------------------------------------------------------------ vocabulary
# "# channel" starts a project channel; "Topic: component = alias; ..." lists its components and the synonym
# another role uses for each (term ambiguity). Aliases share no word with their component.
DOMAINS = {
    "Technology": """roles: Engineering Manager; Backend Engineer; Frontend Engineer; SRE; Product Manager; QA Lead;
        Data Engineer; Security Engineer; UX Designer; Support Lead
        # Payments Platform Revamp
        Webhook reliability: payment webhook = PSP callbacks; refund webhook = chargeback notices
        Checkout performance: checkout API = buy endpoint; cart service = basket backend
        Fraud controls: fraud scoring job = risk model run; dispute queue = claims inbox
        # Mobile App 5.0
        Release train: iOS release = App Store build; Android beta = Play test track
        Onboarding flow: signup screens = welcome funnel; push permission prompt = notification opt-in
        Offline mode: sync engine = background replication; local cache = on-device store
        # Data Platform Migration
        Warehouse cutover: nightly ETL = overnight batch; warehouse schema = table layout
        Event tracking: clickstream pipeline = analytics firehose; event taxonomy = tracking plan
        Access and privacy: PII vault = sensitive store; access reviews = permission audits""",
    "Finance": """roles: Controller; Treasury Analyst; Compliance Officer; FP&A Lead; Risk Manager; Product Owner;
        Data Analyst; Internal Auditor; Operations Lead; Legal Counsel
        # Treasury Management System Implementation
        Cash positioning: cash forecast = liquidity outlook; bank statement import = MT940 feed
        Payments hub: payment approval workflow = release chain; vendor payment batch = supplier run
        Hedging: FX exposure report = currency risk sheet; hedge accounting memo = IFRS 9 paper
        # AML Transaction Monitoring
        Alert tuning: alert scoring model = risk engine; scenario library = detection rules
        Case handling: investigation queue = case backlog; SAR filing = suspicious activity report
        Customer due diligence: KYC refresh = periodic review; sanctions screening = list matching
        # Month-End Close Automation
        Reconciliations: intercompany reconciliation = IC matching; bank reconciliation = cash rec
        Reporting pack: variance commentary = flux notes; board reporting pack = management deck
        Close calendar: accrual process = period-end estimates; journal approval = entry sign-off""",
    "Healthcare": """roles: Clinical Lead; Nurse Manager; Health Informatics Analyst; Privacy Officer; Product Manager;
        Integration Engineer; Quality Manager; Pharmacist; Operations Coordinator; Patient Experience Lead
        # Patient Portal Relaunch
        Appointments: appointment reminders = visit nudges; online booking = self-scheduling
        Messaging: secure messaging = patient inbox; triage routing = message sorting
        Results: lab results release = result publishing; imaging viewer = scan browser
        # EHR Integration Program
        Interfaces: HL7 feed = ADT stream; FHIR gateway = interoperability layer
        Medication safety: medication reconciliation = med rec; allergy alerts = intolerance warnings
        Data quality: patient matching = identity resolution; problem list cleanup = diagnosis hygiene
        # Remote Monitoring Pilot
        Devices: blood pressure cuffs = BP kits; glucose meters = sugar readers
        Escalations: vital sign triggers = reading limits; nurse callback = outreach call
        Enrollment: consent form = participation agreement; eligibility criteria = inclusion rules""",
    "Manufacturing": """roles: Plant Manager; Process Engineer; Quality Engineer; Maintenance Lead;
        Supply Chain Planner; Safety Officer; Automation Engineer; Production Supervisor; Procurement Lead;
        Continuous Improvement Lead
        # Line 3 Retooling
        Changeover: die change procedure = tool swap; line balancing = station loading
        Commissioning: servo press = press cell; vision inspection = camera check
        Safety: lockout procedure = LOTO steps; guarding upgrade = fence retrofit
        # MES Rollout
        Shop-floor data: downtime codes = stop reasons; OEE dashboard = efficiency board
        Traceability: lot genealogy = batch trace; label printing = tag output
        Integration: ERP interface = SAP link; work order sync = job ticket feed
        # Supplier Quality Program
        Audits: supplier audit schedule = vendor visits; corrective action process = 8D workflow
        Incoming inspection: sampling plan = AQL table; gauge calibration = instrument checks
        Sourcing: dual sourcing = second supplier; safety stock = buffer inventory""",
}
PEOPLE = ("Priya", "Marco", "Lena", "Tomasz", "Aisha", "Kenji", "Sofia", "Daniel", "Nora", "Ravi", "Elena",
          "Jonas", "Maya", "Omar", "Chloe", "Felix", "Ines", "Kwame", "Hana", "Lucas", "Zara", "Mateo", "Yara")
VENDORS = ("Northwind", "Contoso", "Globex", "Initech", "Vandelay", "Tyrell", "Soylent", "Wayne Systems")
REGIONS = ("the EU", "the US East", "APAC", "the Nordics", "LATAM", "the UK")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday")
# aspect -> values; no value shares a word with its aspect (so a decisive update avoids the question's words)
ASPECTS = {
    "rollout plan": ("a {pct}% canary held for {n} days", "region by region, starting with {region}",
                     "one cut-over on {weekday} night", "a dark launch behind a feature flag for {n} days"),
    "sign-off rule": ("{role} approves alone", "{role} and {role2} both approve", "approval from the change board",
                      "async approval in the tracker within {n} hours"),
    "sync cadence": ("a weekly check-in every {weekday}", "a check-in every {n} working days",
                     "check-ins on {weekday} and {weekday2}", "check-ins at milestones only"),
    "alert threshold": ("paging at {n}% errors", "paging when p95 latency passes {ms} ms",
                        "a warning at {n}% errors and a page at {n2}%", "paging only after {n} failed health checks"),
    "fallback plan": ("manual replay from the audit log", "failover to the {vendor} backup",
                      "queueing requests for up to {n} hours", "a read-only mode with a banner"),
    "test strategy": ("contract checks against the {vendor} sandbox", "a {n}-day soak in staging",
                      "shadow traffic at {pct}%", "a manual regression pass by the {role}"),
    "data retention": ("{n} days of raw events", "{n} months of aggregates only",
                       "raw events for {n} days, then anonymised", "no raw storage beyond {n} hours"),
    "escalation path": ("page {person} first, then the on-call lead", "straight to the on-call {role}",
                        "a ticket to the {role} within {n} hours", "the incident channel, then {person}"),
    "go-live date": ("{mdate}",),
    "vendor choice": ("{vendor}",),
}
DELIVERABLES = ("load test report", "migration runbook", "cost estimate", "risk register update", "API contract draft",
                "rollback checklist", "training deck", "vendor comparison sheet", "capacity forecast",
                "security review notes", "stakeholder briefing", "acceptance criteria")

T = {  # message templates; {c} component, {a} aspect, {v} value, {old}/{new} values, {p} a person
    "propose": ("Proposal for the {a} on the {c}: {v}. {why}", "Putting a stake in the ground on the {c} {a}: {v}. "
                "{why} {ask}", "For the {c}, I'd go with {v} as the {a}. {why}", "Draft {a} for the {c} is in the "
                "doc: {v}. {ask}", "{open}my suggestion for the {a} of the {c} is {v}. {why}",
                "Can we agree the {c} {a} is {v}? {why}"),
    "discuss": ("Does {v} as the {a} for the {c} cover {edge}?", "+1 on {v} for the {c} {a}, as long as {cond}.",
                "I'll write the {a} for the {c} into the runbook once it's settled.", "Who approves the {c} {a} "
                "in the end, {role} or {role2}?", "Looping in {p} on the {a} for the {c}: {edge} is my worry.",
                "The {c} {a} touches the {other} too, let's keep that in mind.", "Data point for the {c} {a} "
                "discussion: {metric}."),
    "confirm": ("Confirmed: the {a} for the {c} is {v}. {close}", "Locking it in: {c} {a} = {v}. {close}",
                "Decision logged: {v} is the {a} for the {c}. {close}", "Agreed in the call: the {c} goes with {v} "
                "as its {a}. {close}"),
    "challenge": ("Is the current {a} for the {c} ({v}) still right? {problem}", "Raising a flag on the current {c} "
                  "{a}: {v} looks shaky. {problem}", "Not sure the current {a} for the {c}, {v}, still works. "
                  "{problem}", "Concern about the current {a} on the {c}: {problem} That hits {v} directly."),
    "pile_on": ("If we change the {a} for the {c} now, {consequence}.", "Same worry here on the {c} {a}. {problem}",
                "What would the {a} for the {c} look like without {v}?", "For the record, the {c} {a} was "
                "fine until {vendor} changed things.", "Can we settle the {c} {a} today? Otherwise {consequence}."),
    "update": ("{cue} instead of {old}, {new}. {tail}", "New direction: {new} instead; {old} no longer holds. {tail}",
               "OK, we drop {old} and switch to {new}. {tail}", "{cue} {old} is off the table, going with {new} "
               "instead. {tail}", "Changing course: {new} replaces {old}. {tail}"),
    "revise": ("Moving the {a} for the {c} to {new} from {weekday}, instead of {old}.", "Heads-up: the {c} {a} "
               "changes to {new}, replacing {old}."),
    "trouble": ("Since the {c} {a} became {v}, things got worse. {problem}", "{v} as the {a} on the {c} is "
                "causing trouble. {problem}", "Seeing issues with the {a} for the {c} since we went with {v}. "
                "{problem}"),
    "rollback": ("Let's roll back to {old}. {new} created more work than it saved. {tail}", "Reverting: back to "
                 "{old}, {new} is shelved. {tail}", "Roll back to {old} instead, {new} isn't working out. {tail}"),
    "ack": ("Works for me.", "Updating the tracker.", "Makes sense, I'll tell the {role} folks.", "Fine by me.",
            "Noted, will adjust the tickets.", "Good call.", "Agreed, fewer moving parts.", "{p}, can you tell "
            "{vendor}?", "OK, I'll let the {role} know.", "Sounds right to me.", "Noted for {meeting}."),
    "alias": ("Heads-up: the {role} team calls the {c} the {alias}, so expect that name in tickets.",
              "When {p} says {alias} they mean the {c}.", "Quick glossary note: {alias} = {c} for the {role} side."),
    "assign": ("@{p} can you take the {d} for the {c}? Ideally before {weekday}.", "{p}, could you own the {d} for "
               "the {c}? The {role} needs it soon."),
    "accept": ("On it, I'll have the {d} for the {c} ready by {mdate}.", "Sure, the {d} for the {c} will be done by "
               "{mdate}."),
    "chatter": ("{hey}anyone else seeing {glitch} on {env}?", "CI is red on {branch} again, {looking}.",
                "Standup is at {time} {day_ref}.", "OOO {weekday} {daypart}, {p} covers for me.",
                "Lunch {lunch}? {food} place is open again.", "Who has the {vendor} sandbox credentials? {plz}",
                "Reminder: {meeting} on {weekday} at {time}.", "Pushed a fix for {glitch}, {verify}.",
                "Can someone review my PR for the {other}? {plz}", "{p}, {thanks}!",
                "Back from {away}, {catchup}.", "Is {meeting} {day_ref} still on?",
                "VPN maintenance {day_ref} at {time}, heads-up.", "Notes from the {vendor} call are in the doc{emph}.",
                "Running late for {meeting}, {delay}.", "Dashboards for the {other} look {health} so far today.",
                "Who's on call {oncall}? {oncall_ask}", "The wiki page for the {other} is {wiki}, will fix it.",
                "Slides for {meeting} are in the shared folder.",
                "Does anyone know why {glitch} only happens on {env}?",
                "Blocked for the next hour, {blocked}. {back}", "Shipping a small config tweak on {env} at {time}.",
                "{hey}{meeting} is on {weekday} this week, new invite sent.", "Who's joining {meeting} in person?"),
    "status": ("Status on the {c}: {progress}.", "Finished the {task} for the {c}.", "Still blocked on {vendor} for "
               "the {c}.", "{c}: {n} tickets left this sprint.", "Quick status: the {c} work is {progress}.",
               "Finished the {task}, {notes}.", "Paired with {p} on the {c} {task}, {outcome}.",
               "Dry run of the {c} went {outcome2}.", "Opened {n} tickets for the {c} follow-ups."),
    "lookalike": ("Do we have the {a} for the {c} written down anywhere?", "Parking the {c} {a} question until the "
                  "next phase.", "The {a} for the {c} came up in the {vendor} call, nothing new."),
}
SLOTS = {
    "why": ("Keeps the on-call load sane.", "It matches what {vendor} recommends.", "It held up for the {other}.",
            "The {role} team can live with it.", "Lowest effort before the phase ends.", ""),
    "ask": ("Objections by {weekday}?", "Thoughts?", "Shout if this breaks anything on your side.",
            "@{p} does this work for you?", ""),
    "open": ("Quick one: ", "FYI, ", "Thinking out loud: ", ""),
    "edge": ("the {region} traffic spike", "retries during deploys", "the month-end peak", "weekend traffic",
             "partial outages at {vendor}"),
    "cond": ("{role} signs off", "we document it", "it doesn't slip the {weekday} demo", "{p} is fine with it"),
    "metric": ("{n} incidents last quarter", "p95 at {ms} ms", "{pct}% of traffic from {region}"),
    "problem": ("{vendor} changed their limits last week.", "We saw {n} incidents in staging.",
                "It doubles the load on the {other}.", "The {role} team can't staff it.",
                "The audit asked for stricter evidence.", "The pilot showed p95 up by {ms} ms."),
    "close": ("Thanks all.", "I'll log it in the tracker.", "Tickets to follow.", ""),
    "consequence": ("the {other} needs a tweak as well", "we lose a week", "the {role} needs a heads-up"),
    "cue": ("Scratch that:", "Correction:", "Update after the call:", "Right, revised:", "After the review:"),
    "tail": ("{p}'s numbers settled it.", "Less risk for the same outcome.", "That one we can actually staff.",
             "Same outcome, far less rework.", ""),
    "progress": ("on track", "about {pct}% done", "waiting on review", "slipping a couple of days"),
    "task": ("design review", "first draft", "dry run", "handover notes", "estimate"),
    "time": ("9:45", "10:30", "11:15", "12:30", "14:00", "15:30", "16:45"),
    "lunch": ("at 12:30", "at noon", "tomorrow", "on {weekday}"),
    "hey": ("", "", "Morning! ", "Hey all, ", "psa: "),
    "glitch": ("the login loop", "a 502 on the dashboard", "slow builds", "the flaky {other} check",
               "timeouts from {vendor}", "odd cache misses", "duplicate emails"),
    "env": ("staging", "the preview env", "prod", "my laptop", "the shared sandbox"),
    "branch": ("main", "the release branch", "the {other} repo"),
    "looking": ("looking into it", "on it", "bisecting now", "checking the last merge"),
    "daypart": ("morning", "afternoon", "after 3pm"),
    "food": ("The noodle", "The taco", "The salad", "The ramen", "The dumpling"),
    "plz": ("", "Need them today.", "DM me.", "Thanks!"),
    "meeting": ("the sprint review", "the demo", "the retro", "planning", "the all-hands", "standup"),
    "verify": ("can someone verify?", "should be green now", "let me know if it comes back"),
    "thanks": ("thanks for the quick review", "thanks for covering yesterday", "nice catch on the {other}",
               "appreciate the notes"),
    "away": ("the offsite", "two days off", "the conference", "a long weekend"),
    "day_ref": ("today", "tomorrow", "on {weekday}"),
    "emph": ("", ", skim when you can", ", short version: nothing new"),
    "delay": ("train delays", "school run", "my previous call overran", "wifi is dying"),
    "health": ("normal", "a bit noisy", "quiet", "fine"),
    "oncall": ("this weekend", "tonight", "over the holiday", "next week"),
    "wiki": ("outdated", "missing the new diagrams", "contradicting the runbook"),
    "blocked": ("interviews", "a customer call", "heads-down on the {other}", "security training"),
    "outcome": ("looks good", "found two gaps", "needs another pass", "mostly done"),
    "catchup": ("catching up on the thread", "reading the backlog now", "anything urgent for me?",
                "ping me if I missed something"),
    "oncall_ask": ("", "Want to swap a shift.", "Need a second pair of eyes on {env}."),
    "back": ("", "Back at {time}.", "Ping me if urgent."),
    "notes": ("notes in the doc", "link in the tracker", "summary in the thread", "will share at {meeting}"),
    "outcome2": ("fine", "better than expected", "rough, retrying tomorrow", "okay with a few warnings"),
}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
KINDS = ("revise", "stable", "stable", "rollback", "stable")  # decision lifecycles, cycled: 40% change state
_SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Topic:
    channel: str
    name: str
    components: tuple[tuple[str, str], ...]  # (component, alias)


def parse_domain(spec: str) -> tuple[tuple[str, ...], tuple[Topic, ...]]:
    """The vocabulary mini-format above -> (roles, topics)."""
    roles, topics, channel = (), [], ""
    for line in (part.strip() for part in spec.replace(";\n", "; ").splitlines()):
        if line.startswith("roles:"):
            roles = tuple(r.strip() for r in line[6:].split(";"))
        elif line.startswith("#"):
            channel = line[1:].strip()
        elif line:
            name, rest = line.split(":", 1)
            pairs = tuple(tuple(s.strip() for s in item.split("=")) for item in rest.split(";"))
            topics.append(Topic(channel, name.strip(), pairs))
    return roles, tuple(topics)


def month_day(day: datetime) -> str:
    return f"{MONTHS[day.month - 1]} {day.day}"


@dataclass
class Draft:
    """A message before ids are assigned (ids follow chronological order, like GroupMemBench's Msg_N)."""

    time: datetime
    author: str
    topic: Topic
    text: str
    reply: int | None = None  # index of the parent draft


@dataclass
class Decision:
    """One (component, aspect) decision and the drafts that carry its states."""

    kind: str
    topic: Topic
    component: str
    alias: str
    aspect: str
    first: str
    proposal: int = -1
    confirm: int = -1
    current: str = ""
    superseded: str | None = None
    earlier: tuple[int, ...] = ()  # drafts stating the superseded state
    update: int = -1  # the decisive update (revise / rollback)


@dataclass
class Planned:
    qtype: str
    text: str
    asker: str
    answer: str
    evidence: tuple[tuple[int, ...], ...] = ()
    superseded: str | None = None


@dataclass
class DomainGenerator:
    """Generates one domain (one memory scope) from its own seeded random stream."""

    scope: str
    seed: int
    messages: int
    rng: random.Random = field(init=False)
    drafts: list[Draft] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(f"tmem-demo:{self.seed}:{self.scope}")
        roles, self.topics = parse_domain(DOMAINS[self.scope])
        n = self.rng.randint(6, 12)
        self.people = self.rng.sample(PEOPLE, n)
        shuffled = self.rng.sample(roles, len(roles))
        self.role_of = {p: shuffled[i % len(shuffled)] for i, p in enumerate(self.people)}
        self.components = [c for t in self.topics for c, _ in t.components]
        self.here = self.topics[0]  # the topic being written (for same-channel slot values)
        self.phase_bounds = {ch: self.bounds() for ch in dict.fromkeys(t.channel for t in self.topics)}

    # ------------------------------------------------------------------------------------------- helpers
    def bounds(self) -> list[datetime]:
        inner = [START + timedelta(minutes=k * DAYS * 1440 // 5 + self.rng.randint(-2880, 2880)) for k in (1, 2, 3, 4)]
        return [START, *inner, START + timedelta(days=DAYS + 1)]

    def phase_at(self, channel: str, t: datetime) -> tuple[str, int, int, float]:
        b = self.phase_bounds[channel]
        k = max(i for i in range(5) if b[i] <= t)
        progress = round((t - b[k]).total_seconds() / (b[k + 1] - b[k]).total_seconds(), 2)
        return PHASES[k], STAGES[k], k + 1, progress

    def fill(self, template: str, **ctx: str) -> str:
        """Fill {slots} left to right (fixed values from ctx, phrases from SLOTS, drawn values), then tidy spaces."""
        text = re.sub(r"\s+([.,;:?!])", r"\1", " ".join(self.expand(template, ctx).split()))
        return re.sub(r"([?!])\.", r"\1", text)

    def expand(self, template: str, ctx: dict[str, str]) -> str:
        def slot(match: re.Match) -> str:
            name = match.group(1)
            if name in ctx:
                return ctx[name]
            if name in SLOTS:
                return self.expand(self.rng.choice(SLOTS[name]), ctx)
            return self.draw(name)
        return _SLOT.sub(slot, template)

    def draw(self, name: str) -> str:
        r = self.rng
        draws = {"n": lambda: str(r.randint(2, 9)), "n2": lambda: str(r.randint(10, 20)),
                 "pct": lambda: str(r.choice((5, 10, 20, 25, 50))), "ms": lambda: str(r.randrange(250, 1500, 50)),
                 "role": lambda: r.choice(list(self.role_of.values())), "vendor": lambda: r.choice(VENDORS),
                 "region": lambda: r.choice(REGIONS), "weekday": lambda: r.choice(WEEKDAYS),
                 "other": lambda: r.choice([c for t in self.topics if t.channel == self.here.channel
                                            for c, _ in t.components]),
                 "mdate": lambda: month_day(START + timedelta(days=r.randint(DAYS, DAYS + 40)))}
        draws.update(role2=draws["role"], weekday2=draws["weekday"], person=lambda: r.choice(self.people),
                     p=lambda: r.choice(self.people))
        return draws[name]()

    def when(self, day: int) -> datetime:
        """A working-hours moment on `day` (days from START)."""
        return START + timedelta(days=day, minutes=self.rng.randint(0, 500), seconds=self.rng.randint(0, 59))

    def later(self, t: datetime, lo: int, hi: int) -> datetime:
        return t + timedelta(minutes=self.rng.randint(lo, hi), seconds=self.rng.randint(0, 59))

    def post(self, t: datetime, author: str, topic: Topic, text: str, reply: int | None = None) -> int:
        self.drafts.append(Draft(t, author, topic, text, reply))
        return len(self.drafts) - 1

    def say(self, kind: str, t: datetime, topic: Topic, author: str | None = None, reply: int | None = None,
            **ctx: str) -> int:
        author, self.here = author or self.rng.choice(self.people), topic
        return self.post(t, author, topic, self.fill(self.rng.choice(T[kind]), **ctx), reply)

    # ---------------------------------------------------------------------------------------- decisions
    def chatter(self, t: datetime, topic: Topic, most: int = 2) -> datetime:
        """Interleaved chatter inside an episode."""
        for _ in range(self.rng.randint(0, most)):
            t = self.later(t, 1, 6)
            self.say("chatter", t, topic)
        return t

    def decide(self, d: Decision) -> None:
        """Proposed, discussed, confirmed; then, for revise / rollback, questioned and changed."""
        ctx = dict(c=d.component, a=d.aspect)
        proposer, challenger, decider = self.rng.sample(self.people, 3)
        day = self.rng.randint(1, DAYS - 18)
        t = self.when(day)
        d.proposal = self.say("propose", t, d.topic, proposer, v=d.first, **ctx)
        for _ in range(self.rng.randint(1, 4)):
            t = self.chatter(self.later(t, 2, 25), d.topic, 1)
            reply = d.proposal if self.rng.random() < 0.5 else None
            self.say("discuss", t, d.topic, reply=reply, v=d.first, **ctx)
        t = self.when(day + self.rng.randint(0, 3)) if self.rng.random() < 0.6 else self.later(t, 5, 60)
        d.confirm = self.say("confirm", max(t, self.later(self.drafts[-1].time, 1, 5)), d.topic, decider,
                             v=d.first, **ctx)
        d.current, d.earlier = d.first, (d.proposal, d.confirm)
        if d.kind == "revise":
            self.revise(d, day + self.rng.randint(4, 12), challenger, decider, ctx)
        elif d.kind == "rollback":
            self.roll_back(d, day + self.rng.randint(4, 8), challenger, decider, ctx)

    def revise(self, d: Decision, day: int, challenger: str, decider: str, ctx: dict) -> None:
        old, new = d.first, self.values_other(d)
        t = self.when(day)
        challenge = self.say("challenge", t, d.topic, challenger, v=old, **ctx)
        for _ in range(self.rng.randint(2, 3)):  # several high-BM25 messages around the challenge
            t = self.chatter(self.later(t, 4, 20), d.topic, 1)
            self.say("pile_on", t, d.topic, reply=challenge, v=old, **ctx)
        t = self.later(t, 10, 60)
        d.update = self.say("update", t, d.topic, decider, reply=challenge, old=old, new=new)
        self.acks(t, d)
        d.current, d.superseded = new, old

    def roll_back(self, d: Decision, day: int, challenger: str, decider: str, ctx: dict) -> None:
        v1, v2 = d.first, self.values_other(d)
        revision = self.say("revise", self.when(day), d.topic, decider, old=v1, new=v2, **ctx)
        t = self.when(day + self.rng.randint(3, 6))
        trouble = self.say("trouble", t, d.topic, challenger, v=v2, **ctx)
        for _ in range(self.rng.randint(2, 3)):
            t = self.chatter(self.later(t, 4, 20), d.topic, 1)
            self.say(self.rng.choice(("trouble", "pile_on")), t, d.topic, reply=trouble, v=v2, **ctx)
        t = self.later(t, 10, 60)
        d.update = self.say("rollback", t, d.topic, decider, reply=trouble, old=v1, new=v2)
        self.acks(t, d)
        d.current, d.superseded, d.earlier = v1, v2, (revision,)

    def values_other(self, d: Decision) -> str:
        value = d.first
        while value == d.first:
            value = self.fill(self.rng.choice(ASPECTS[d.aspect]))
        return value

    def acks(self, t: datetime, d: Decision) -> None:
        for _ in range(self.rng.randint(1, 2)):
            t = self.later(t, 1, 15)
            self.say("ack", t, d.topic, reply=d.update)

    # ------------------------------------------------------------------------------------------- filler
    def filler(self, count: int, excluded: list[tuple[str, str]]) -> None:
        """Bursts of chatter, status pings and look-alike mentions, weekdays mostly, until `count` drafts."""
        weights = [1 if (START + timedelta(days=d)).weekday() >= 5 else 10 for d in range(DAYS)]
        while count > 0:
            topic = self.rng.choice(self.topics)
            t, last = self.when(self.rng.choices(range(DAYS), weights)[0]), None
            for _ in range(min(count, self.rng.randint(3, 18))):
                kind = self.rng.choices(("chatter", "status", "lookalike"), (70, 22, 8))[0]
                c = self.rng.choice(topic.components)[0]
                a = self.rng.choice(list(ASPECTS))
                if kind == "lookalike" and (c, a) in excluded:
                    kind = "status"
                reply = last if kind == "chatter" and self.rng.random() < 0.2 else None
                last = self.say(kind, t, topic, reply=reply, c=c, a=a)
                t = self.later(t, 1, 14)
                count -= 1

    # ------------------------------------------------------------------------------------------ questions
    def plan(self) -> list[Planned]:
        """Decisions, action items and glossary notes, then filler up to the message budget; -> questions."""
        per_type = min(30, max(4, self.messages // 375))
        slots = []  # (topic, component, alias, aspect), component-major: a component's decisions sit together
        spare = []  # pairs never decided: abstention material
        per_component = min(6, max(3, self.messages // 3000))  # decided aspects; two more stay undecided
        for topic, (component, alias) in self.rng.sample(
                [(t, c) for t in self.topics for c in t.components], len(self.components)):
            aspects = self.rng.sample(list(ASPECTS), per_component + 2)
            slots += [(topic, component, alias, a) for a in aspects[:per_component]]
            spare += [(topic, component, a) for a in aspects[per_component:]]
        decisions = []
        for i, (topic, component, alias, aspect) in enumerate(slots[:max(4 * per_type, self.messages // 60)]):
            if len(self.drafts) > 0.6 * self.messages:
                break
            self.here = topic
            first = self.fill(self.rng.choice(ASPECTS[aspect]))
            decisions.append(Decision(KINDS[i % len(KINDS)], topic, component, alias, aspect, first))
            self.decide(decisions[-1])
        questions = self.knowledge_updates(decisions, per_type) + self.temporal(decisions, per_type)
        questions += self.multi_hop(decisions, per_type) + self.user_implicit(per_type)
        questions += self.term_ambiguity(decisions, per_type) + self.abstention(spare, per_type)
        self.filler(self.messages - len(self.drafts), [(c, a) for _, c, a in spare[:per_type]])
        return questions

    def asker(self) -> str:
        return self.rng.choice(self.people)

    def knowledge_updates(self, decisions: list[Decision], n: int) -> list[Planned]:
        forms = ("What is the current {a} for the {c}?", "What {a} is the team using for the {c} now?",
                 "Where did the team land on the {a} for the {c}?")
        out = []
        for i, d in enumerate([d for d in decisions if d.kind != "stable"][:n]):
            answer = (f"Instead of {d.superseded}, {d.current}." if d.kind == "revise"
                      else f"Instead of {d.superseded}, go back to {d.current}.")
            out.append(Planned("knowledge_update", forms[i % 3].format(a=d.aspect, c=d.component), self.asker(),
                               answer, ((d.update,), d.earlier), d.superseded))
        return out

    def temporal(self, decisions: list[Decision], n: int) -> list[Planned]:
        stable = [d for d in decisions if d.kind == "stable"][::-1]
        changed = [d for d in decisions if d.kind != "stable"][::-1]
        picked = [d for pair in zip(stable, changed) for d in pair][:n]
        out = []
        for d in picked:
            event, draft = ("confirmed", d.confirm) if d.kind == "stable" else ("last changed", d.update)
            text = f"On what date (YYYY-MM-DD) was the {d.aspect} for the {d.component} {event}?"
            out.append(Planned("temporal", text, self.asker(), self.drafts[draft].time.date().isoformat(),
                               ((draft,),)))
        return out

    def multi_hop(self, decisions: list[Decision], n: int) -> list[Planned]:
        held = Counter((d.aspect, v) for d in decisions for v in dict.fromkeys((d.first, d.current, d.superseded)))
        by_component: dict[str, list[Decision]] = {}
        for d in decisions:  # the bridge value must name exactly one component
            if d.kind == "stable" and (by_component.get(d.component) or held[(d.aspect, d.current)] == 1):
                by_component.setdefault(d.component, []).append(d)
        pairs = [(g[0], g[1]) for g in by_component.values() if len(g) > 1][:n]
        return [Planned("multi_hop", f"What {b.aspect} was confirmed for the component whose {a.aspect} is "
                        f"{a.current}?", self.asker(), f"{b.current} (for the {a.component})",
                        ((a.confirm,), (b.confirm,))) for a, b in pairs]

    def user_implicit(self, n: int) -> list[Planned]:
        out, taken = [], []
        while len(out) < n:
            topic = self.rng.choice(self.topics)
            component = self.rng.choice(topic.components)[0]
            owner, lead = self.rng.sample(self.people, 2)
            if (owner, component) in taken:  # one commitment per person and component: the question is unique
                continue
            taken.append((owner, component))
            deliverable, due = self.rng.choice(DELIVERABLES), self.draw("mdate")
            t = self.when(self.rng.randint(0, DAYS - 2))
            ask = self.say("assign", t, topic, lead, p=owner, d=deliverable, c=component)
            accept = self.say("accept", self.later(t, 3, 90), topic, owner, reply=ask, d=deliverable, c=component,
                              mdate=due)
            text = self.rng.choice(("What did I commit to deliver for the {c}, and by when?",
                                    "What am I supposed to hand in for the {c}, and by when?")).format(c=component)
            out.append(Planned("user_implicit", text, owner, f"The {deliverable}, by {due}.", ((accept,),)))
        return out

    def term_ambiguity(self, decisions: list[Decision], n: int) -> list[Planned]:
        out = []
        for d in [d for d in decisions if d.kind == "stable"][1::2][:n]:
            speaker = self.rng.choice(self.people)
            note = self.say("alias", self.when(self.rng.randint(0, DAYS - 1)), d.topic, speaker, c=d.component,
                            alias=d.alias, role=self.role_of[speaker], p=speaker)
            out.append(Planned("term_ambiguity", f"What {d.aspect} was confirmed for the {d.alias}?", self.asker(),
                               d.current, ((d.confirm,), (note,))))
        return out

    def abstention(self, spare: list[tuple[Topic, str, str]], n: int) -> list[Planned]:
        forms = ("What {a} was agreed for the {c}?", "Which {a} did the team pick for the {c}?")
        return [Planned("abstention", forms[i % 2].format(a=a, c=c), self.asker(), ABSTENTION)
                for i, (_, c, a) in enumerate(spare[:n])]

    # ------------------------------------------------------------------------------------------- output
    def corpus(self) -> CorpusData:
        from tmem.store import CorpusData

        planned = self.plan()
        order = sorted(range(len(self.drafts)), key=lambda i: (self.drafts[i].time, i))
        ids = {i: f"Msg_{n}" for n, i in enumerate(order, start=1)}
        messages = []
        for i in order:
            d = self.drafts[i]
            phase, stage, phase_order, progress = self.phase_at(d.topic.channel, d.time)
            messages.append(Message(ids[i], self.scope, d.text, d.time, d.author, self.role_of[d.author],
                                    d.topic.channel, d.topic.name, phase, stage, phase_order, progress,
                                    ids[d.reply] if d.reply is not None else None))
        questions, golds, counters = [], [], dict.fromkeys(QUESTION_TYPES, 0)
        for qtype in QUESTION_TYPES:
            for p in (p for p in planned if p.qtype == qtype):
                counters[qtype] += 1
                qid = f"{qtype}_{counters[qtype]}"
                questions.append(Question(qid, self.scope, p.text, p.asker, qtype))
                evidence = tuple(tuple(ids[i] for i in unit) for unit in p.evidence)
                golds.append((self.scope, Gold(qid, p.answer, evidence, p.superseded)))
        return CorpusData(messages, questions, golds)


def generate(seed: int = 7, messages: int = 3000, domains: int = 1) -> CorpusData:
    """The demo corpus: `messages` in total over `domains` scopes (Technology, Finance, Healthcare, Manufacturing)."""
    if not 1 <= domains <= len(DOMAINS):
        raise ValueError(f"domains must be between 1 and {len(DOMAINS)}, got {domains}")
    if messages < 300 * domains:
        raise ValueError(f"at least 300 messages per domain are needed, got {messages} for {domains} domain(s)")
    from tmem.store import CorpusData

    parts = [DomainGenerator(scope, seed, messages // domains + (i < messages % domains)).corpus()
             for i, scope in enumerate(list(DOMAINS)[:domains])]
    return CorpusData([m for p in parts for m in p.messages], [q for p in parts for q in p.questions],
                      [g for p in parts for g in p.golds])


# -------------------------------------------------------------------------------------------------- writers
def message_record(m: Message) -> dict:
    record = {"kind": "message", "scope": m.scope, "id": m.id, "text": m.text, "timestamp": m.timestamp.isoformat(),
              "author": m.author, "role": m.role, "channel": m.channel, "topic": m.topic, "phase": m.phase,
              "stage": m.stage, "phase_order": m.phase_order, "phase_progress": m.phase_progress,
              "reply_to": m.reply_to}
    return {k: v for k, v in record.items() if v is not None}


def question_record(q: Question, g: Gold) -> dict:
    record = {"kind": "question", "scope": q.scope, "id": q.id, "text": q.text, "asking_user": q.asking_user,
              "type": q.type, "gold_answer": g.answer, "gold_evidence": [list(u) for u in g.evidence] or None,
              "superseded": g.superseded}
    return {k: v for k, v in record.items() if v is not None}


def write_jsonl(data: CorpusData, path: Path) -> None:
    """The project's JSONL format (tmem/corpora/jsonl.py): messages, then questions with their gold."""
    golds = {(s, g.question_id): g for s, g in data.golds}
    lines = [message_record(m) for m in data.messages]
    lines += [question_record(q, golds[(q.scope, q.id)]) for q in data.questions]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        handle.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in lines)


def write_groupmembench(data: CorpusData, root: Path) -> None:
    """GroupMemBench's layout: data/final/<Domain>/synthetic_domain_channels_rolevariants_<Domain>.json (channel ->
    messages, content HTML-escaped) and questions/<Domain>/<type>.jsonl (+ tmem's evidence / superseded)."""
    golds = {(s, g.question_id): g for s, g in data.golds}
    for scope in dict.fromkeys(m.scope for m in data.messages):
        channels: dict[str, list] = {}
        for m in (m for m in data.messages if m.scope == scope):
            channels.setdefault(m.channel, []).append(
                {"msg_node": m.id, "content": html.escape(m.text, quote=False), "author": m.author, "role": m.role,
                 "timestamp": m.timestamp.isoformat(), "reply_to": m.reply_to, "phase_name": m.phase,
                 "topic": m.topic, "stage": m.stage, "phase_order": m.phase_order, "phase_progress": m.phase_progress})
        out = root / "data" / "final" / scope / f"synthetic_domain_channels_rolevariants_{scope}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(channels, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        for qtype in QUESTION_TYPES:
            rows = [q for q in data.questions if q.scope == scope and q.type == qtype]
            lines = []
            for q in rows:
                g = golds[(scope, q.id)]
                record = {"id": q.id, "question": q.text, "answer": g.answer, "asking_user_id": q.asking_user,
                          "evidence": [list(u) for u in g.evidence], "superseded": g.superseded}
                lines.append(json.dumps({k: v for k, v in record.items() if v not in (None, [])}, ensure_ascii=False))
            qfile = root / "questions" / scope / f"{qtype}.jsonl"
            qfile.parent.mkdir(parents=True, exist_ok=True)
            qfile.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


# ------------------------------------------------------------------------------------------------------ CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=7, help="random seed (default 7, the shipped demo)")
    parser.add_argument("--messages", type=int, default=3000, help="messages in total (default 3000)")
    parser.add_argument("--domains", type=int, default=1, help="domains = memory scopes, 1-4 (default 1)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="a .jsonl file (tmem JSONL) or a folder (GroupMemBench layout); default data/demo.jsonl")


def main(args: argparse.Namespace) -> int:
    import time

    started = time.perf_counter()
    data = generate(args.seed, args.messages, args.domains)
    if args.out.suffix == ".jsonl":
        write_jsonl(data, args.out)
    else:
        write_groupmembench(data, args.out)
    scopes = ", ".join(dict.fromkeys(m.scope for m in data.messages))
    print(f"{len(data.messages):,} messages, {len(data.questions):,} questions in {scopes} -> {args.out} "
          f"({time.perf_counter() - started:.2f} s)")
    return 0
