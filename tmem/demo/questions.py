"""The demo's questions (a mixin of tmem.demo.generator.DomainGenerator: `self` is the generator): the decisions
the generator writes and their lifecycles, then one planner per GroupMemBench question type that picks what to
ask, who asks, the gold answer and the drafts that hold its evidence units.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tmem.demo.vocabulary import ABSTENTION, ASPECTS, DAYS, DELIVERABLES, KINDS, Style, Topic


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
    style: Style | None = None  # how the decisive update is made (STYLES), for changed decisions
    added: str | None = None  # the value a partial update adds to the standing one


@dataclass
class Planned:
    qtype: str
    text: str
    asker: str
    answer: str
    evidence: tuple[tuple[int, ...], ...] = ()
    superseded: str | None = None


class QuestionPlans:
    """The question half of DomainGenerator."""

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
            answer = (f"{d.current}." if d.superseded is None else f"Instead of {d.superseded}, {d.current}."
                      if d.kind == "revise" else f"Instead of {d.superseded}, go back to {d.current}.")
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
        held = Counter((d.aspect, v) for d in decisions
                       for v in dict.fromkeys((d.first, d.current, d.superseded, d.added)))
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
