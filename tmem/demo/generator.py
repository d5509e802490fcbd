"""The demo corpus's generator (tmem.demo): one `DomainGenerator` per memory scope writes drafts of messages from
the vocabulary (tmem.demo.vocabulary), plans decisions and their lifecycles, then the questions of the six
GroupMemBench types with gold answers and evidence units (tmem.demo.questions); `generate` joins the scopes into one
`CorpusData`. Each draft's template kind and the decision it was written for are recorded (`kinds`), so the
generator's planned edges (tmem.demo.planned) become the corpus's gold links: display and scoring only.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from tmem.demo.planned import planned_edges, planned_links
from tmem.demo.questions import Decision, QuestionPlans
from tmem.demo.vocabulary import (
    ASPECTS,
    DAYS,
    DOMAINS,
    PEOPLE,
    PHASES,
    QUESTION_TYPES,
    REGIONS,
    SINGLE_VALUED,
    SLOT_PATTERN,
    SLOTS,
    STAGES,
    START,
    STYLES,
    VENDORS,
    WEEKDAYS,
    T,
    Topic,
    month_day,
    parse_domain,
)
from tmem.types import CorpusData, Gold, Message, Question


@dataclass
class Draft:
    """A message before ids are assigned (ids follow chronological order, like GroupMemBench's Msg_N)."""

    time: datetime
    author: str
    topic: Topic
    text: str
    reply: int | None = None  # index of the parent draft


@dataclass
class DomainGenerator(QuestionPlans):
    """Generates one domain (one memory scope) from its own seeded random stream."""

    scope: str
    seed: int
    messages: int
    rng: random.Random = field(init=False)
    drafts: list[Draft] = field(default_factory=list)
    kinds: dict[int, tuple[str, Decision | None]] = field(default_factory=dict)  # draft -> (kind, its decision)
    deciding: Decision | None = None  # the decision being written (drafts said meanwhile belong to it)

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
        self.changes = 0  # changed decisions so far: the next one takes STYLES[changes % len(STYLES)]

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
        return SLOT_PATTERN.sub(slot, template)

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
        self.kinds[len(self.drafts)] = (kind, self.deciding)
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
        ctx, self.deciding = dict(c=d.component, a=d.aspect), d  # what is said now belongs to d (planned edges)
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
        if d.kind != "stable":
            d.style, self.changes = STYLES[self.changes % len(STYLES)], self.changes + 1
        if d.kind == "revise":
            self.revise(d, day + self.rng.randint(4, 12), challenger, decider, ctx)
        elif d.kind == "rollback":
            self.roll_back(d, day + self.rng.randint(4, 8), challenger, decider, ctx)
        self.deciding = None

    def revise(self, d: Decision, day: int, challenger: str, decider: str, ctx: dict) -> None:
        old, new = d.first, self.values_other(d)
        t = self.when(day)
        challenge = self.say("challenge", t, d.topic, challenger, v=old, **ctx)
        for _ in range(self.rng.randint(2, 3)):  # several high-BM25 messages around the challenge
            t = self.chatter(self.later(t, 4, 20), d.topic, 1)
            self.say("pile_on", t, d.topic, reply=challenge, v=old, **ctx)
        t = self.later(t, 10, 60)
        style = d.style
        partial = style.partial and d.aspect not in SINGLE_VALUED
        kind = ("partial" if partial else "update") + ("" if style.cue else "_plain")
        d.update = self.say(kind, t, d.topic, decider, reply=challenge if style.reply else None, old=old, new=new)
        self.acks(t, d)
        # A partial update adds to the standing value: both hold, nothing is superseded.
        d.current, d.superseded = (f"{old}, plus {new}", None) if partial else (new, old)
        d.added = new if partial else None

    def roll_back(self, d: Decision, day: int, challenger: str, decider: str, ctx: dict) -> None:
        v1, v2 = d.first, self.values_other(d)
        revision = self.say("revise", self.when(day), d.topic, decider, old=v1, new=v2, **ctx)
        t = self.when(day + self.rng.randint(3, 6))
        trouble = self.say("trouble", t, d.topic, challenger, v=v2, **ctx)
        for _ in range(self.rng.randint(2, 3)):
            t = self.chatter(self.later(t, 4, 20), d.topic, 1)
            self.say(self.rng.choice(("trouble", "pile_on")), t, d.topic, reply=trouble, v=v2, **ctx)
        t = self.later(t, 10, 60)
        d.update = self.say("rollback" if d.style.cue else "rollback_plain", t, d.topic, decider,
                            reply=trouble if d.style.reply else None, old=v1, new=v2)
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

    # ------------------------------------------------------------------------------------------- output
    def order(self) -> list[int]:
        """Draft indexes in time order (ties in draft order): message Msg_N is the N-th of them."""
        return sorted(range(len(self.drafts)), key=lambda i: (self.drafts[i].time, i))

    def corpus(self, chatter_roots: bool = True) -> CorpusData:
        """The scope's messages, questions and gold, and the planned edges as typed gold links (a ROOT is a
        self-link, as the store keeps it); `chatter_roots`: chatter replying to nothing is a gold ROOT too."""
        planned = self.plan()
        order = self.order()
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
        return CorpusData(messages, questions, golds, planned_links(self, order, chatter_roots))


def generate(seed: int = 7, messages: int = 3000, domains: int = 1) -> CorpusData:
    """The demo corpus: `messages` in total over `domains` scopes (Technology, Finance, Healthcare, Manufacturing),
    with the generator's planned edges as its gold links (tmem.demo.planned; chatter replying to nothing a ROOT)."""
    if not 1 <= domains <= len(DOMAINS):
        raise ValueError(f"domains must be between 1 and {len(DOMAINS)}, got {domains}")
    if messages < 300 * domains:
        raise ValueError(f"at least 300 messages per domain are needed, got {messages} for {domains} domain(s)")
    parts = [DomainGenerator(scope, seed, messages // domains + (i < messages % domains)).corpus()
             for i, scope in enumerate(list(DOMAINS)[:domains])]
    return CorpusData([m for p in parts for m in p.messages], [q for p in parts for q in p.questions],
                      [g for p in parts for g in p.golds], [link for p in parts for link in p.links])


def planned_sidecar(seed: int, messages: int, domains: int,
                    chatter_roots: bool = False) -> tuple[CorpusData, list[dict]]:
    """The corpus `generate(seed, messages, domains)` makes (chatter roots as chosen) and its planned edges as the
    lines of a gold_edges.jsonl sidecar: scope, child, parent (None for a ROOT), relation, the plan step that made it.
    scripts/demo_gold_edges.py writes them; scored, never fitted on (tmem.demo.provenance)."""
    parts, edges = [], []
    for i, scope in enumerate(list(DOMAINS)[:domains]):
        gen = DomainGenerator(scope, seed, messages // domains + (i < messages % domains))
        parts.append(gen.corpus(chatter_roots))
        ids = {j: f"Msg_{n}" for n, j in enumerate(gen.order(), start=1)}
        edges += [{"scope": scope, "child": ids[e.child], "parent": None if e.parent is None else ids[e.parent],
                   "relation": e.relation, "note": e.note} for e in planned_edges(gen, chatter_roots)]
    data = CorpusData([m for p in parts for m in p.messages], [q for p in parts for q in p.questions],
                      [g for p in parts for g in p.golds], [link for p in parts for link in p.links])
    return data, edges
