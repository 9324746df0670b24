"""Registry: a name -> Builtin map that refuses duplicates and definitions without hooks."""

from __future__ import annotations

from typing import Any

import pytest

from modelserving.plugins import Builtin, Registry, RegistryError, default_registry
from modelserving.plugins.base import HOOK_METHODS, EmptyConfig
from modelserving.plugins.builtins import demo_pod_tweaks


def definition(name: str, hooks: set[str] | None = None, summary: str = "test") -> Builtin:
    return Builtin(
        name=name,
        config_model=EmptyConfig,
        factory=lambda n, cfg: object(),
        summary=summary,
        hooks=frozenset({"on_pod_create"} if hooks is None else hooks),
    )


def test_register_get_names_and_iteration() -> None:
    registry = Registry()
    b = definition("b", {"on_pod_ready"})
    a = definition("a", {"on_pod_create", "on_pod_ready"})
    assert registry.register(b) is b
    assert registry.register(a) is a
    assert registry.get("a") is a
    assert registry.get("c") is None
    assert registry.names() == ["a", "b"]
    assert list(registry) == [a, b]
    assert "a" in registry
    assert "c" not in registry
    assert 3 not in registry


def test_registries_are_independent() -> None:
    first, second = Registry(), Registry()
    first.register(definition("a"))
    assert "a" not in second
    second.register(definition("a"))  # the same name is fine in another registry


def test_a_duplicate_name_is_refused_naming_the_plugin() -> None:
    registry = Registry()
    original = registry.register(definition("gpu-tweaks", summary="first"))
    with pytest.raises(RegistryError, match=r"plugin 'gpu-tweaks' is already registered"):
        registry.register(definition("gpu-tweaks", summary="second"))
    assert registry.get("gpu-tweaks") is original
    assert registry.names() == ["gpu-tweaks"]


@pytest.mark.parametrize(
    ("hooks", "shown"),
    [
        (set(), "none"),
        ({"on_pod_delete"}, "['on_pod_delete']"),
        ({"on_pod_create", "OnPodReady"}, "['OnPodReady', 'on_pod_create']"),
        ({"validate_config"}, "['validate_config']"),
    ],
    ids=["no hooks", "unknown hook", "one unknown among known", "not a registrable hook"],
)
def test_a_definition_without_known_hooks_is_refused(hooks: set[str], shown: str) -> None:
    registry = Registry()
    with pytest.raises(RegistryError) as info:
        registry.register(definition("bad", hooks))
    message = str(info.value)
    assert message.startswith("plugin 'bad' must declare hooks among on_pod_create, on_pod_ready")
    assert message.endswith(f"got {shown}")
    assert "bad" not in registry


def test_registry_error_is_a_value_error() -> None:
    assert issubclass(RegistryError, ValueError)


def test_every_hook_method_can_be_declared() -> None:
    registry = Registry()
    registry.register(definition("all", set(HOOK_METHODS)))
    assert registry.get("all") is not None


def test_default_registry_holds_the_built_ins() -> None:
    registry = default_registry()
    assert "demo-pod-tweaks" in registry
    assert registry.get("demo-pod-tweaks") is demo_pod_tweaks.BUILTIN
    assert default_registry() is registry, "built once"


# The least config of the built-ins that have required fields.
REQUIRED_CONFIG: dict[str, dict[str, Any]] = {
    "accelerator": {"vendor": "nvidia"},
    "inference-engine": {"engine": "vllm"},
}


def test_every_default_built_in_makes_an_instance_with_its_hooks() -> None:
    for builtin in default_registry():
        config = builtin.config_model.model_validate(REQUIRED_CONFIG.get(builtin.name, {}))
        instance: Any = builtin.factory(builtin.name, config)
        assert instance.name == builtin.name
        for hook in builtin.hooks:
            assert callable(getattr(instance, hook))
        assert builtin.summary


def test_the_library_of_built_ins_is_registered_with_wasm_twins() -> None:
    names = {
        "accelerator",
        "demo-pod-tweaks",
        "entry-address-file",
        "hccl-ranktable",
        "inference-engine",
        "lws-standard-labels",
        "rdma-network",
        "ready-reporter",
    }
    assert set(default_registry().names()) == names
    for builtin in default_registry():
        assert builtin.wasm_module == f"{builtin.name}.wasm"
