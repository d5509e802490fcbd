"""Reply patterns that say a language model is not discriminating: every relation reply the same label with the
same confidence, every evidence-utility reply the same label. Qwen2.5-Coder-1.5B answered UPDATE with
confidence 0.91 for every IRC child it was shown (docs/backends.md); such a forest is the model's bias, not
structure. Pure functions over replies or a stored trace, so the CLI, the batch summary and the app report the
same thing. A pattern is a warning, not a failure: a model may legitimately give one label to a handful of
replies, hence the minimum count.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

MIN_REPLIES = 5  # fewer replies than this say nothing about a bias


def label_pattern(replies: Sequence[tuple[str, float | None]], role: str) -> str | None:
    """A one-line warning when all `replies` ((label, confidence or None), one per model reply) share one label
    or one confidence; None otherwise or when there are fewer than MIN_REPLIES."""
    if len(replies) < MIN_REPLIES:
        return None
    labels = Counter(label for label, _ in replies)
    confidences = Counter(c for _, c in replies if c is not None)
    same_label = len(labels) == 1
    same_confidence = len(confidences) == 1 and sum(confidences.values()) == len(replies)
    n, label = len(replies), next(iter(labels))
    if same_label and same_confidence:
        return (f"constant reply pattern: all {n} {role} replies were {label} with confidence "
                f"{next(iter(confidences)):g} (the model is not discriminating)")
    if same_label:
        return f"constant label: all {n} {role} replies were {label}"
    if same_confidence:
        return f"constant confidence: all {n} {role} replies had confidence {next(iter(confidences)):g}"
    return None


def trace_patterns(trace) -> list[str]:
    """Patterns in a trace's language-model replies: the first (most confident) choice of each child the relation
    role was asked about, and each evidence-utility selection. Offline stand-ins are not checked."""
    out = []
    structuring, discovery = trace.stage("structuring"), trace.stage("discovery")
    if structuring is not None and not structuring.offline:
        firsts = [max(d.choices, key=lambda c: c.confidence) for d in trace.decisions if d.choices]
        found = label_pattern([(c.relation, c.confidence) for c in firsts], "relation")
        out += [found] if found else []
    if discovery is not None and not discovery.offline:
        found = label_pattern([(s.label, None) for s in trace.selections], "evidence-utility")
        out += [found] if found else []
    return out


STAGE_ROLE = {"discovery": "evidence utility", "structuring": "relation", "answer": "answer", "judge": "judge"}


def model_lines(trace) -> list[str]:
    """Per language-model stage: calls, prompt and reply tokens, seconds and prompt tokens per second (the CLI
    summary; on a CPU these say why a run takes minutes), then any reply pattern."""
    out = []
    for s in trace.stages:
        if s.offline or s.name not in STAGE_ROLE or not (s.usage.calls or s.usage.cached_calls):
            continue
        u = s.usage
        rate = f", {u.prompt_tokens / s.seconds:,.0f} tokens/s" if u.calls and s.seconds > 0 else ""
        cached = f" ({u.cached_calls} from the cache)" if u.cached_calls else ""
        out.append(f"{STAGE_ROLE[s.name]}: {u.calls + u.cached_calls} call(s){cached}, {u.prompt_tokens:,} prompt + "
                   f"{u.completion_tokens:,} reply tokens, {s.seconds:.1f} s{rate} [{s.backend.split(' [', 1)[0]}]")
    return out + [f"WARNING {p}" for p in trace_patterns(trace)]
