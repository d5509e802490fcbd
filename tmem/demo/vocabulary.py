"""The demo corpus's vocabulary (tmem.demo): domains, people, templates and slot values, and the question types.

Everything here is data the generator (tmem.demo.generator) draws from with a seeded `random.Random`; the
domain mini-format is parsed by `parse_domain`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

CURATED_QUESTION = ("Technology", "knowledge_update_1")
QUESTION_TYPES = ("multi_hop", "knowledge_update", "temporal", "user_implicit", "term_ambiguity", "abstention")
ABSTENTION = "There is no information available in the conversation to answer this question."
START, DAYS = datetime(2025, 3, 3, 9, 0), 42  # a Monday; six weeks
PHASES = ("Scoping", "Solution Design", "Build & Integration", "Pilot", "Rollout & Handover")
STAGES = (1, 1, 2, 2, 3)

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
    # The same decisive change without any state-change wording (neither tmem.text.STATE_CHANGE_CUES nor the
    # relation role's STATE_CHANGE matches; tests/test_demo.py checks the generated texts), so that the offline
    # roles' cue rules do not hold by construction (STYLES).
    "update_plain": ("Let's go with {new}. {ptail}", "Decided in the call: {new}, and {old} is off the table. {ptail}",
                     "So: {new}; {old} is shelved. {ptail}", "OK, {new}. {old} did not survive the review. {ptail}",
                     "We go with {new}. {ptail}"),
    "rollback_plain": ("We return to {old}; {new} is shelved. {ptail}",
                       "So it's {old} again, {new} cost more than it saved. {ptail}",
                       "Let's go with {old} once more, {new} did not work out. {ptail}"),
    # A partial update: the standing value stays and a second one joins it (the answer names both).
    "partial": ("Update: {old} stays, and {new} joins it on top. {tail}", "Revised after the call: keep {old}, plus "
                "{new} on top. {tail}"),
    "partial_plain": ("So {old} stays, with {new} alongside it. {ptail}", "Keep {old}, and {new} as well. {ptail}"),
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
    "ptail": ("{p}'s numbers settled it.", "Less risk for the same outcome.", "That one we can staff.",
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


@dataclass(frozen=True)
class Style:
    """How one decisive change is made: whether it replies to the challenge it answers, whether its wording
    carries a state-change cue, and (revisions only) whether it replaces the value or adds to it."""

    reply: bool
    cue: bool
    partial: bool = False


# The changed decisions cycle through these eight styles, in order (per domain), so the proportions are exact
# over every 8 changes: rollbacks 4/8 (KINDS alternates revise and rollback), replies 4/8, cue wording 4/8,
# partial updates 2/8 (2 of the 4 revisions; a single-valued aspect, go-live date or vendor choice, is replaced
# instead). Each rollback and each revision covers every (reply, cue) pair once. The first style (reply + cue,
# a full revision) is the curated question's, the one the README walks through.
STYLES = (Style(True, True), Style(False, True), Style(False, False), Style(True, False),
          Style(True, False, True), Style(True, True), Style(False, True, True), Style(False, False))
SINGLE_VALUED = ("go-live date", "vendor choice")
SLOT_PATTERN = re.compile(r"\{(\w+)\}")


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
