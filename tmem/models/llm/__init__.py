"""Language-model roles over an OpenAI-compatible API and what their calls need: the transport, the batch API,
endpoints and probes, call discipline (rate limit, backoff, circuit breaker), the response cache, token counts,
spend caps and the dry run that counts calls instead of sending them."""
