"""Spec 1.5 naming rules (alias lookup, load / load_group / subtree), run against both resources.

Every rule test takes ``make``: a factory building a DictResource, or a SafetensorsResource over the same
tensors written to a sharded checkpoint, so both implementations are held to the same contract.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from tilefoundry.runtime.resource import (
    Absolute,
    DictResource,
    Preprocessed,
    RuntimeResource,
    SafetensorsResource,
    WeightNotFoundError,
)

Make = Callable[..., RuntimeResource]


def _t(*values: float, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


# A small "Hugging Face"-shaped checkpoint: two decoder layers, a per-layer norm a child reads, experts.
RAW: dict[str, torch.Tensor] = {
    "model.embed_tokens.weight": torch.arange(12, dtype=torch.bfloat16).reshape(4, 3),
    "model.norm.weight": _t(7.0, 8.0),
    "model.layers.0.input_layernorm.weight": _t(0.5, 0.25),
    "model.layers.0.self_attn.q_proj.weight": torch.arange(6, dtype=torch.float16).reshape(2, 3),
    "model.layers.0.self_attn.kv_norm.weight": _t(1.0, 2.0),
    "model.layers.0.mlp.experts.0.gate_proj.weight": _t(10.0, 11.0),
    "model.layers.0.mlp.experts.1.gate_proj.weight": _t(20.0, 21.0),
    "model.layers.0.mlp.experts.2.gate_proj.weight": _t(30.0, 31.0),
    "model.layers.1.input_layernorm.weight": _t(-0.5, -0.25),
    "model.layers.1.self_attn.q_proj.weight": torch.arange(6, 12, dtype=torch.float16).reshape(2, 3),
    "model.layers.1.self_attn.kv_norm.weight": _t(3.0, 4.0),
    "model.layers.1.self_attn.special_norm.weight": _t(5.0, 6.0),
    "model.layers.1.mlp.experts.0.gate_proj.weight": _t(40.0, 41.0),
    "model.layers.1.mlp.experts.1.gate_proj.weight": _t(50.0, 51.0),
    "model.layers.1.mlp.experts.2.gate_proj.weight": _t(60.0, 61.0),
    "lm_head.weight": torch.arange(6, dtype=torch.int8).reshape(3, 2),
    "fused.qkv": torch.arange(12, dtype=torch.float32).reshape(6, 2),
}

ALIAS: dict[str, object] = {
    "layer0": "model.layers.0",
    "layer1": "model.layers.1",
    "attention": "self_attn",
    "w_q": "q_proj.weight",
    "gamma_kv": "kv_norm.weight",
    "model.layers.1.self_attn.gamma_kv": "special_norm.weight",
    "w_gate": ("mlp.experts.0.gate_proj.weight", "mlp.experts.1.gate_proj.weight",
               "mlp.experts.2.gate_proj.weight"),
    "layer_norm": Absolute("model.layers.0.input_layernorm.weight"),
    "w_q_t": Preprocessed("q_proj.weight", lambda t: t.t()),
    "embed_t": Preprocessed(Absolute("model.embed_tokens.weight"), lambda t: t.t()),
    "w_k": Preprocessed(Absolute("fused.qkv"), lambda t: t[2:4]),
}


def _write_sharded(directory: Path, tensors: Mapping[str, torch.Tensor], n_shards: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    keys = sorted(tensors)
    weight_map: dict[str, str] = {}
    for i in range(n_shards):
        name = f"model-{i + 1:05d}-of-{n_shards:05d}.safetensors"
        part = {k: tensors[k].contiguous() for k in keys[i::n_shards]}
        save_file(part, str(directory / name))
        weight_map.update(dict.fromkeys(part, name))
    (directory / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map})
    )


@pytest.fixture(params=["dict", "safetensors"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Make:
    """Factory ``make(data=RAW, prefix="", alias=None)`` for the parametrized resource kind."""

    def build(data: Mapping[str, torch.Tensor] = RAW, prefix: str = "", alias=None) -> RuntimeResource:
        if request.param == "dict":
            return DictResource(data, prefix=prefix, alias=alias)
        ckpt = tmp_path / f"ckpt{len(list(tmp_path.iterdir()))}"
        _write_sharded(ckpt, data, n_shards=3)
        return SafetensorsResource(str(ckpt), prefix=prefix, device="cpu", alias=alias)

    build.kind = request.param  # type: ignore[attr-defined]
    return build


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)


# ---------------------------------------------------------------- protocol and identity


def test_both_resources_satisfy_the_protocol(make: Make) -> None:
    assert isinstance(make(), RuntimeResource)


def test_identity_reads_the_full_raw_key(make: Make) -> None:
    res = make()
    assert _same(res.load("model.norm.weight"), RAW["model.norm.weight"])


def test_identity_joins_the_constructor_prefix(make: Make) -> None:
    res = make(prefix="model.layers.0.")
    assert _same(res.load("input_layernorm.weight"), RAW["model.layers.0.input_layernorm.weight"])


def test_prefix_without_trailing_dot_names_the_same_scope(make: Make) -> None:
    res = make(prefix="model.layers.0")
    assert res.prefix == "model.layers.0."
    assert _same(res.load("input_layernorm.weight"), RAW["model.layers.0.input_layernorm.weight"])


def test_subtree_by_identity_extends_the_prefix(make: Make) -> None:
    res = make().subtree("model").subtree("layers").subtree("1").subtree("self_attn")
    assert res.prefix == "model.layers.1.self_attn."
    assert _same(res.load("kv_norm.weight"), RAW["model.layers.1.self_attn.kv_norm.weight"])


def test_every_stored_element_type_is_kept(make: Make) -> None:
    res = make()
    for key, value in RAW.items():
        got = res.load(key)
        assert got.dtype == value.dtype, key
        assert _same(got, value), key


# ---------------------------------------------------------------- alias lookup order


def test_alias_renames_a_subtree_segment_and_a_leaf(make: Make) -> None:
    attn = make(alias=ALIAS).subtree("layer0").subtree("attention")
    assert attn.prefix == "model.layers.0.self_attn."
    assert _same(attn.load("w_q"), RAW["model.layers.0.self_attn.q_proj.weight"])


def test_bare_entry_fires_under_every_layer(make: Make) -> None:
    root = make(alias=ALIAS)
    # "gamma_kv" is bare; layer0 has no path-qualified entry so the bare one serves it.
    got0 = root.subtree("layer0").subtree("attention").load("gamma_kv")
    assert _same(got0, RAW["model.layers.0.self_attn.kv_norm.weight"])


def test_path_qualified_entry_wins_over_bare_for_its_instance_only(make: Make) -> None:
    root = make(alias=ALIAS)
    got1 = root.subtree("layer1").subtree("attention").load("gamma_kv")
    assert _same(got1, RAW["model.layers.1.self_attn.special_norm.weight"])
    got0 = root.subtree("layer0").subtree("attention").load("gamma_kv")
    assert _same(got0, RAW["model.layers.0.self_attn.kv_norm.weight"])


def test_identity_applies_when_no_entry_matches(make: Make) -> None:
    attn = make(alias=ALIAS).subtree("layer1").subtree("attention")
    assert _same(attn.load("kv_norm.weight"), RAW["model.layers.1.self_attn.kv_norm.weight"])


def test_path_qualified_key_is_spelled_with_the_accumulated_raw_prefix(make: Make) -> None:
    alias = {"layer1": "model.layers.1", "model.layers.1.norm": "input_layernorm.weight"}
    root = make(alias=alias)
    assert _same(root.subtree("layer1").load("norm"), RAW["model.layers.1.input_layernorm.weight"])
    # The entry is per-instance: layer0 has none, so "norm" falls through to identity and is absent.
    with pytest.raises(KeyError, match=r"model\.layers\.0\.norm"):
        root.subtree("model").subtree("layers").subtree("0").load("norm")


def test_subtree_views_carry_the_alias_table_down(make: Make) -> None:
    root = make(alias=ALIAS)
    leaf = root.subtree("layer0").subtree("attention")
    assert dict(leaf.alias) == dict(root.alias)


def test_alias_value_with_dots_joins_onto_the_prefix(make: Make) -> None:
    layer = make(alias={"kv": "self_attn.kv_norm.weight"}, prefix="model.layers.1.")
    assert _same(layer.load("kv"), RAW["model.layers.1.self_attn.kv_norm.weight"])


# ---------------------------------------------------------------- load / KeyError / tuple refusal


def test_load_absent_raises_keyerror_naming_the_raw_key(make: Make) -> None:
    res = make(alias=ALIAS).subtree("layer0")
    with pytest.raises(WeightNotFoundError) as info:
        res.load("nope")
    assert isinstance(info.value, KeyError)
    assert "model.layers.0.nope" in str(info.value)
    assert "'nope'" in str(info.value)


def test_load_absent_alias_target_names_the_alias(make: Make) -> None:
    res = make(alias={"w": "missing.weight"})
    with pytest.raises(KeyError) as info:
        res.load("w")
    assert "missing.weight" in str(info.value) and "alias 'w'" in str(info.value)


def test_load_of_a_tuple_alias_is_refused_naming_load_group(make: Make) -> None:
    res = make(alias=ALIAS).subtree("layer0")
    with pytest.raises(TypeError, match=r"load_group\('w_gate'\)"):
        res.load("w_gate")


def test_load_rejects_non_string_and_empty_names(make: Make) -> None:
    res = make()
    with pytest.raises(TypeError, match="str"):
        res.load(3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        res.load("")


# ---------------------------------------------------------------- load_group


def test_load_group_returns_raw_tensors_in_declared_order_unstacked(make: Make) -> None:
    for layer, base in (("layer0", 0), ("layer1", 1)):
        group = make(alias=ALIAS).subtree(layer).load_group("w_gate")
        assert isinstance(group, tuple) and len(group) == 3
        for i, tensor in enumerate(group):
            assert _same(tensor, RAW[f"model.layers.{base}.mlp.experts.{i}.gate_proj.weight"])


def test_load_group_keeps_a_reversed_declaration_order(make: Make) -> None:
    alias = {"g": ("experts.2.gate_proj.weight", "experts.0.gate_proj.weight")}
    group = make(alias=alias, prefix="model.layers.1.mlp").load_group("g")
    assert group is not None
    assert _same(group[0], RAW["model.layers.1.mlp.experts.2.gate_proj.weight"])
    assert _same(group[1], RAW["model.layers.1.mlp.experts.0.gate_proj.weight"])


@pytest.mark.parametrize("name", ["w_q", "layer_norm", "w_q_t", "embed_t", "not_aliased", "input_layernorm"])
def test_load_group_is_none_for_the_one_to_one_case(make: Make, name: str) -> None:
    # str, Absolute, Preprocessed (relative and Absolute-named), and no entry at all.
    assert make(alias=ALIAS).subtree("layer0").load_group(name) is None


def test_load_group_with_a_missing_member_raises_keyerror_naming_it(make: Make) -> None:
    res = make(alias={"g": ("experts.0.gate_proj.weight", "experts.9.gate_proj.weight")},
               prefix="model.layers.0.mlp")
    with pytest.raises(KeyError, match=r"model\.layers\.0\.mlp\.experts\.9\.gate_proj\.weight"):
        res.load_group("g")


# ---------------------------------------------------------------- subtree refusals


@pytest.mark.parametrize(
    ("seg", "kind"),
    [("w_gate", "tuple"), ("w_q_t", "Preprocessed"), ("layer_norm", "Absolute")],
)
def test_subtree_rejects_non_relative_hits(make: Make, seg: str, kind: str) -> None:
    res = make(alias=ALIAS)
    with pytest.raises(TypeError) as info:
        res.subtree(seg)
    message = str(info.value)
    assert kind in message and repr(seg) in message and "one relative path" in message


def test_subtree_rejects_an_empty_segment(make: Make) -> None:
    with pytest.raises(ValueError, match="non-empty"):
        make().subtree("")


# ---------------------------------------------------------------- Absolute


def test_absolute_ignores_the_prefix(make: Make) -> None:
    # A child deep in layer1 reads a tensor stored at layer0's level, above its own scope.
    deep = make(alias=ALIAS).subtree("layer1").subtree("attention")
    assert _same(deep.load("layer_norm"), RAW["model.layers.0.input_layernorm.weight"])


def test_absolute_reaches_a_tensor_the_parent_owns(make: Make) -> None:
    alias = {"layer1": "model.layers.1", "attention": "self_attn",
             "model.layers.1.self_attn.pre_norm": Absolute("model.layers.1.input_layernorm.weight")}
    attn = make(alias=alias).subtree("layer1").subtree("attention")
    assert _same(attn.load("pre_norm"), RAW["model.layers.1.input_layernorm.weight"])


def test_absolute_missing_key_raises_keyerror(make: Make) -> None:
    res = make(alias={"x": Absolute("nowhere.weight")}, prefix="model")
    with pytest.raises(KeyError, match=r"'nowhere\.weight'"):
        res.load("x")


# ---------------------------------------------------------------- Preprocessed


def test_preprocessed_applies_its_read_to_the_relative_raw_tensor(make: Make) -> None:
    attn = make(alias=ALIAS).subtree("layer1").subtree("attention")
    got = attn.load("w_q_t")
    assert _same(got, RAW["model.layers.1.self_attn.q_proj.weight"].t())


def test_preprocessed_with_an_absolute_name_ignores_the_prefix(make: Make) -> None:
    deep = make(alias=ALIAS).subtree("layer0").subtree("attention")
    assert _same(deep.load("embed_t"), RAW["model.embed_tokens.weight"].t())
    assert _same(deep.load("w_k"), RAW["fused.qkv"][2:4])


def test_preprocessed_read_that_changes_dtype_is_refused_naming_the_converter(make: Make) -> None:
    res = make(alias={"w": Preprocessed(Absolute("model.norm.weight"), lambda t: t.to(torch.bfloat16))})
    with pytest.raises(TypeError) as info:
        res.load("w")
    message = str(info.value)
    assert "torch.float32" in message and "torch.bfloat16" in message and "converter" in message


def test_preprocessed_read_returning_a_non_tensor_is_refused(make: Make) -> None:
    res = make(alias={"w": Preprocessed(Absolute("model.norm.weight"), lambda t: t.tolist())})
    with pytest.raises(TypeError, match="returned list, not a torch.Tensor"):
        res.load("w")


def test_preprocessed_missing_raw_raises_keyerror(make: Make) -> None:
    res = make(alias={"w": Preprocessed("gone.weight", lambda t: t)}, prefix="model.layers.0")
    with pytest.raises(KeyError, match=r"model\.layers\.0\.gone\.weight"):
        res.load("w")


# ---------------------------------------------------------------- alias value construction


def test_preprocessed_refuses_a_tuple_name_naming_the_weight_converter() -> None:
    with pytest.raises(TypeError) as info:
        Preprocessed(("a.weight", "b.weight"), lambda t: t)  # type: ignore[arg-type]
    assert "converter" in str(info.value) and "('a.weight', 'b.weight')" in str(info.value)


def test_preprocessed_is_frozen_and_checks_its_fields() -> None:
    entry = Preprocessed("a.weight", torch.t)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.name = "b.weight"  # type: ignore[misc]
    with pytest.raises(TypeError, match="callable"):
        Preprocessed("a.weight", "transpose")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="non-empty raw name"):
        Preprocessed("", torch.t)
    with pytest.raises(TypeError, match="non-empty raw name"):
        Preprocessed(3, torch.t)  # type: ignore[arg-type]
    assert Preprocessed(Absolute("x"), torch.t).name == Absolute("x")


def test_absolute_is_frozen_and_takes_a_nonempty_str() -> None:
    entry = Absolute("model.norm.weight")
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.name = "x"  # type: ignore[misc]
    with pytest.raises(TypeError, match="non-empty raw checkpoint key"):
        Absolute("")


@pytest.mark.parametrize(
    ("alias", "error", "words"),
    [
        ({"w": ["a", "b"]}, TypeError, "use a tuple"),
        ({"w": 3}, TypeError, "an alias value is a str"),
        ({"w": ()}, ValueError, "empty tuple"),
        ({"w": ("a", 3)}, TypeError, "every member"),
        ({"w": ""}, ValueError, "empty name"),
        ({3: "a"}, TypeError, "alias keys"),
        (["w", "a"], TypeError, "mapping"),
    ],
)
def test_malformed_alias_tables_are_refused_at_construction(make: Make, alias, error, words: str) -> None:
    with pytest.raises(error, match=words):
        make(alias=alias)


def test_alias_table_is_copied_and_read_only(make: Make) -> None:
    table = {"w": "model.norm.weight"}
    res = make(alias=table)
    table["w"] = "lm_head.weight"
    assert _same(res.load("w"), RAW["model.norm.weight"])
    with pytest.raises(TypeError):
        res.alias["w"] = "x"  # type: ignore[index]


# ---------------------------------------------------------------- DictResource specifics


def test_dict_resource_returns_the_stored_tensor_object() -> None:
    tensor = torch.ones(3)
    assert DictResource({"a.w": tensor}).subtree("a").load("w") is tensor


def test_dict_resource_is_isolated_from_later_changes_to_the_mapping() -> None:
    data = {"a": torch.ones(1)}
    res = DictResource(data)
    data["b"] = torch.zeros(1)
    del data["a"]
    assert torch.equal(res.load("a"), torch.ones(1))
    with pytest.raises(KeyError):
        res.load("b")


def test_dict_resource_refuses_non_tensor_values_and_non_mappings() -> None:
    with pytest.raises(TypeError, match=r"DictResource\['w'\] is a list"):
        DictResource({"w": [1.0]})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="mapping"):
        DictResource([("w", torch.ones(1))])  # type: ignore[arg-type]


def test_dict_resource_missing_key_suggests_close_matches() -> None:
    res = DictResource({"layer0.w_q": torch.ones(1)})
    with pytest.raises(KeyError, match="close matches: 'layer0.w_q'"):
        res.subtree("layer0").load("wq")
