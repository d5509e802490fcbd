"""What model calls have spent, and a cap that stops a run before it spends more (`--max-cost USD`,
`--max-tokens N`).

Every request a language-model role sends passes `Budget.reserve` first: under a cap, the request's worst case
(its counted prompt tokens plus its output limit, at the given prices) must fit in what is left after the tokens
already spent and those reserved by the calls in flight, or it is not sent and `BudgetExceeded` is raised. When the
reply comes, the reservation is replaced by the usage the server reported. So a capped run never spends past its
cap (up to the token counter's error on servers with another tokenizer), and the calls it could not afford are
simply missing: a batch run writes no record for them and resumes there. Replies served from the response cache
cost nothing and pass freely.

Without a cap the budget still meters what was sent, per role, which the batch run turns into tokens and cost so
far (its progress and summary). Stages are named after the role's stage (App. D.1: evidence utility in discovery,
relation in structuring, answer, judge).
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field

ROLE_STAGE = {"evidence_utility": "discovery", "relation": "structuring", "answer": "answer", "judge": "judge"}


def usage_counts(prompt_tokens: object, completion_tokens: object) -> tuple[int, int]:
    """The token counts a server reported, as whole numbers >= 0; anything else (negative, NaN, Infinity, a string,
    a bool) is a ValueError naming it: a server fault, never metered (a server reporting -9.9 M tokens once drove
    the meter below zero, and a capped run resumed from there spent 105,989 tokens under a 30,000 cap)."""
    out = []
    for name, value in (("prompt_tokens", prompt_tokens), ("completion_tokens", completion_tokens)):
        whole = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value) and value.is_integer())
        if isinstance(value, bool) or not whole or value < 0:
            raise ValueError(f"the server reported impossible usage: {name} = {str(value)[:40]!r}")
        out.append(int(value))
    return out[0], out[1]


class BudgetExceeded(ValueError):
    """The cap is reached: the call was not sent (a ValueError so that every command reports it as one line)."""


@dataclass(frozen=True)
class Prices:
    """USD per million prompt (input) and completion (output) tokens; both 0 = not configured."""

    input_per_million: float = 0.0
    output_per_million: float = 0.0

    @property
    def configured(self) -> bool:
        return bool(self.input_per_million or self.output_per_million)

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6


@dataclass
class Spent:
    """Tokens sent and their cost (requests answered by a server, failed attempts included)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    def add(self, prompt: int, completion: int, calls: int = 1) -> None:
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.calls += calls

    def as_dict(self, prices: Prices) -> dict:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "cost_usd": round(prices.cost(self.prompt_tokens, self.completion_tokens), 6)
                if prices.configured else None}


@dataclass
class Reservation:
    role: str
    prompt_tokens: int
    completion_tokens: int


@dataclass
class Budget:
    """The spend meter of one process's roles, with an optional cap. `earlier` is what earlier passes of the same
    run already spent (a resumed run keeps to the cap it was given)."""

    prices: Prices = Prices()
    max_cost: float = 0.0  # USD; 0 = no cost cap
    max_tokens: int = 0  # prompt + completion tokens; 0 = no token cap
    earlier: Spent = field(default_factory=Spent)
    by_role: dict[str, Spent] = field(default_factory=dict)
    stopped: str = ""  # why a call was refused (empty while the cap holds)

    def __post_init__(self):
        if self.max_cost and not self.prices.configured:
            raise ValueError("--max-cost needs prices: set --price-input and --price-output (USD per million "
                             "tokens; TMEM_PRICE_INPUT / TMEM_PRICE_OUTPUT)")
        self._lock = threading.Lock()
        self._reserved = Spent()

    @property
    def capped(self) -> bool:
        return bool(self.max_cost or self.max_tokens)

    @property
    def total(self) -> Spent:
        with self._lock:
            return self._sum()

    def _sum(self) -> Spent:  # under the lock
        out = Spent(self.earlier.prompt_tokens, self.earlier.completion_tokens, self.earlier.calls)
        for s in self.by_role.values():
            out.add(s.prompt_tokens, s.completion_tokens, s.calls)
        return out

    def reserve(self, role: str, prompt_tokens: int, max_completion: int) -> Reservation:
        """Hold a request's worst case against the cap; BudgetExceeded (nothing sent) when it does not fit."""
        with self._lock:
            if self.capped:
                spent = self._sum()
                tokens = spent.prompt_tokens + spent.completion_tokens + self._reserved.prompt_tokens + \
                    self._reserved.completion_tokens + prompt_tokens + max_completion
                cost = self.prices.cost(spent.prompt_tokens + self._reserved.prompt_tokens + prompt_tokens,
                                        spent.completion_tokens + self._reserved.completion_tokens + max_completion)
                over = (f"--max-tokens {self.max_tokens}" if self.max_tokens and tokens > self.max_tokens else
                        f"--max-cost {self.max_cost:g} USD" if self.max_cost and cost > self.max_cost else "")
                if over:
                    self.stopped = self.stopped or (
                        f"budget cap {over} reached: {spent.prompt_tokens + spent.completion_tokens} tokens"
                        + (f", {self.prices.cost(spent.prompt_tokens, spent.completion_tokens):.4f} USD"
                           if self.prices.configured else "") + " spent; a call needing up to "
                        f"{prompt_tokens + max_completion} more was not sent")
                    raise BudgetExceeded(self.stopped)
            self._reserved.add(prompt_tokens, max_completion)
        return Reservation(role, prompt_tokens, max_completion)

    def settle(self, reservation: Reservation, prompt_tokens: int, completion_tokens: int, calls: int) -> None:
        """Replace the reservation by what the request spent (0 tokens: the server never answered)."""
        with self._lock:
            self._reserved.add(-reservation.prompt_tokens, -reservation.completion_tokens, -1)
            if calls:
                self.by_role.setdefault(reservation.role, Spent()).add(prompt_tokens, completion_tokens, calls)

    def spend(self, role: str, prompt_tokens: int, completion_tokens: int, calls: int = 1) -> None:
        """Meter tokens spent without a reservation (a batch API's replies, counted when they are downloaded)."""
        with self._lock:
            self.by_role.setdefault(role, Spent()).add(prompt_tokens, completion_tokens, calls)

    def snapshot(self) -> dict:
        """Tokens and cost so far (this pass, earlier passes and their sum), per stage, and the cap."""
        with self._lock:
            stages: dict[str, Spent] = {}
            for role, s in self.by_role.items():
                stages.setdefault(ROLE_STAGE.get(role, role), Spent()).add(s.prompt_tokens, s.completion_tokens,
                                                                           s.calls)
            this = Spent()
            for s in self.by_role.values():
                this.add(s.prompt_tokens, s.completion_tokens, s.calls)
            total = self._sum()
        return {"total": total.as_dict(self.prices), "this_pass": this.as_dict(self.prices),
                "earlier_passes": self.earlier.as_dict(self.prices),
                "stages": {k: v.as_dict(self.prices) for k, v in stages.items()},
                "max_cost": self.max_cost or None, "max_tokens": self.max_tokens or None,
                "prices": {"input_per_million": self.prices.input_per_million,
                           "output_per_million": self.prices.output_per_million}, "stopped": self.stopped or None}
