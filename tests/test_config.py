"""One frozen config with the paper's defaults, help on every field, ablation presets, a stable hash."""
import dataclasses

import pytest

from tmem.config import VARIANTS, TMemConfig, config_hash, field_help, variant_config


def test_paper_defaults():
    c = TMemConfig()
    assert c.retrieval.k == 36
    assert c.retrieval.metadata_fields == ("channel", "phase", "topic", "author", "role")
    d = c.discovery
    assert (d.eps_hours, d.min_samples, d.delta_hours, d.mu, d.pad_hours, d.top_n) == (12, 2, 2, 0.25, 12, 100)
    assert c.compression.budget_tokens == 8192
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.retrieval.k = 3  # type: ignore[misc]


def test_every_field_has_help():
    helps = field_help()
    assert len(helps) > 20 and all(text.strip() for _, text in helps.values())


def test_variants_differ_and_hash_is_stable():
    hashes = {name: config_hash(variant_config(name)) for name in VARIANTS}
    assert len(set(hashes.values())) == len(VARIANTS)
    assert hashes["full"] == config_hash(TMemConfig())
    assert variant_config("flat").discovery.enabled is False
    assert variant_config("untyped-forest").structuring.typed is False
    assert variant_config("no-topic-phase-both").structuring.use_phase is False
    with pytest.raises(KeyError, match="unknown variant"):
        variant_config("nope")


def test_overrides_convert_types_and_reject_bad_names():
    from tmem.config import apply_overrides

    c = apply_overrides(TMemConfig(), ["discovery.mu=0.5", "retrieval.k=12", "structuring.typed=false",
                                       "retrieval.metadata_fields=topic, author"])
    assert (c.discovery.mu, c.retrieval.k, c.structuring.typed) == (0.5, 12, False)
    assert c.retrieval.metadata_fields == ("topic", "author")
    with pytest.raises(ValueError, match="bad setting"):
        apply_overrides(TMemConfig(), ["discovery.nope=1"])
    with pytest.raises(ValueError, match="expected int"):
        apply_overrides(TMemConfig(), ["retrieval.k=many"])
    with pytest.raises(ValueError, match="expected bool"):
        apply_overrides(TMemConfig(), ["structuring.typed=maybe"])
    # a typo must not silently select another behaviour (anything but 'compress' used to mean truncation)
    with pytest.raises(ValueError, match="compression.mode must be one of 'compress', 'truncate', not 'compres'"):
        apply_overrides(TMemConfig(), ["compression.mode=compres"])
    with pytest.raises(ValueError, match="answer.presentation must be one of"):
        TMemConfig().with_("answer", presentation="tree")
