"""The cost side of the Failures page's batch form: prices, a cost cap (`--max-cost`) and an estimate of the
batch's model calls before *Start* (tmem.evaluation.batch.estimate: counted, not sent). A helper of pages/failures.py,
not a page of its own."""
from __future__ import annotations

import pandas as pd
import streamlit as st

from tmem import api
from tmem.api import backends
from tmem.evaluation.batch.estimate import estimate_rows, format_estimate

COLUMNS = {"calls": "calls", "cached_calls": "cached", "prompt_tokens": "prompt tok.",
           "completion_tokens": "completion tok.", "completion_tokens_max": "(max)", "cost_usd": "USD",
           "cost_usd_max": "USD (max)", "from_standins": "on stand-ins"}


def estimate_button() -> bool:
    """In the batch panel, beside *Start*: asks for the estimate of the chosen variants, types, limit and backend
    instead of starting."""
    return st.button("Estimate cost", icon=":material/calculate:", key="batch_estimate_button",
                                 help="Counts the batch's model calls, tokens and cache hits without sending any: "
                                      "the offline stages run here for real, which takes a while for many questions.")


def controls(c, questions, variants, offline: bool, estimate: bool) -> dict:
    """Below the batch form: prices, the cap and the estimate (computed when `estimate` was pressed; `offline`: the
    offline stand-ins, no model call); -> the budget settings for `jobs.start_batch(budget=...)`."""
    operator = backends.operator_prices()
    a, b, d = st.columns(3)
    price_in = a.number_input("Input USD / M tokens", min_value=0.0, value=float(operator.input_per_million), step=0.1,
                              key="batch_price_in", help="Price of a million prompt tokens, for the estimate and "
                              "the cap (batch APIs often charge half).")
    price_out = b.number_input("Output USD / M tokens", min_value=0.0, value=float(operator.output_per_million),
                               step=0.1, key="batch_price_out", help="Price of a million completion tokens.")
    cap = d.number_input("Stop at USD", min_value=0.0, value=0.0, step=1.0, key="batch_max_cost",
                         help="--max-cost: the batch stops cleanly before its model calls could cost more "
                              "(records so far kept; run it again with a higher cap to continue). 0 = no cap.")
    prices = backends.Prices(price_in, price_out)
    if estimate and offline:
        st.session_state["batch_estimate"] = None
        st.caption("Offline stand-ins: no model call, nothing to pay.")
    elif estimate and questions and variants:
        with st.spinner("Counting the batch's model calls (nothing is sent)…"):
            est = api.explorer.estimate_batch_cost(c, variants, questions, prices)
        st.session_state["batch_estimate"] = (est.to_json(), format_estimate(est).split("\n\n", 1)[-1])
    shown = st.session_state.get("batch_estimate")
    if shown:
        body, notes = shown
        priced = body["cost_usd"] is not None
        # the expected figures lead; the worst case (every reply at its whole output limit) comes second
        st.caption(f"Estimate (counted, not sent): {body['calls']} model calls to send, {body['cached_calls']} "
                   f"answered by the cache, {body['prompt_tokens']:,} prompt + {body['completion_tokens']:,} "
                   "completion tokens expected" + (f", {body['cost_usd']:.4f} USD" if priced else "") + ". Worst "
                   f"case, every reply at its whole output limit: {body['completion_tokens_max']:,} completion "
                   "tokens" + (f", {body['cost_usd_max']:.4f} USD" if priced else "") + ".")
        st.dataframe(pd.DataFrame(estimate_rows(body)).rename(columns=COLUMNS), hide_index=True)
        with st.expander("What the estimate rests on"):
            st.text(notes)
    if cap and not prices.configured:
        st.warning("A cost cap needs prices: give the input and output price.", icon=":material/warning:")
        cap = 0.0
    return {k: v for k, v in {"budget.price_input": price_in, "budget.price_output": price_out,
                              "budget.max_cost": cap}.items() if v}
