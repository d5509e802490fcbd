"""Commands that put data in the store: import a corpus, interleave scopes, the demo and its recording, gold
versions."""
