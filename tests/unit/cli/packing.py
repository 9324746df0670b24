"""Reading ``modelserving plugin pack`` output, and loading it the way the controller does.

Shared by the unit tests of ``pack`` and the WebAssembly test of a generated Rust project.
"""

from __future__ import annotations

from typing import Any

import yaml

from modelserving.api.labels import API_VERSION, KIND
from modelserving.api.modelserving import ModelServing, PluginSpec
from modelserving.api.validation import parse_model_serving
from modelserving.chain import Chain, ChainCache
from modelserving.chain.render import render
from modelserving.cli.manifests import read_documents
from modelserving.cli.pack import SNIPPET_PREFIX
from modelserving.plugins.modules import module_from_config_map
from modelserving.sandbox import Sandbox


def parse_pack(text: str, tmp_path: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ConfigMap (read with render's safe manifest reader, as a file kubectl would apply)
    and the spec.plugins entry of the comment."""
    path = tmp_path / "packed.yaml"
    path.write_text(text)
    docs = list(read_documents(str(path)))
    assert len(docs) == 1, "pack prints exactly one object"
    assert len(list(yaml.safe_load_all(text))) == 1
    snippet = "\n".join(
        line[len(SNIPPET_PREFIX) :] for line in text.splitlines() if line.startswith(SNIPPET_PREFIX)
    )
    entries = yaml.safe_load(snippet)
    assert isinstance(entries, list)
    assert len(entries) == 1
    return docs[0], entries[0]


def model_serving(entry: dict[str, Any], config: Any, namespace: str = "default") -> ModelServing:
    """A one-Pod ModelServing whose only plugin is ``entry`` with ``config``."""
    return parse_model_serving(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": "llama", "namespace": namespace, "uid": "u-1", "generation": 1},
            "spec": {
                "replicas": 1,
                "template": {
                    "roles": [
                        {
                            "name": "server",
                            "replicas": 1,
                            "entryTemplate": {
                                "spec": {"containers": [{"name": "main", "image": "busybox"}]}
                            },
                            "workerReplicas": 0,
                        }
                    ]
                },
                "plugins": [{**entry, "config": config}],
            },
        }
    )


def controller_chain(
    config_map: dict[str, Any], ms: ModelServing, sandbox: Sandbox, max_module_bytes: int
) -> Chain:
    """The chain as the controller's reconciler builds it: the ConfigMap the reference names
    (configMapRef.namespace, else the ModelServing's), the module read from it with
    ``module_from_config_map``, then ``ChainCache.get``, which loads the module pinned by its
    sha256 (``Sandbox.load(data, sha256)``) and runs ValidateConfig."""
    meta = config_map["metadata"]

    def modules(spec: PluginSpec) -> bytes:
        assert spec.module is not None
        ref = spec.module.config_map_ref
        assert (ref.namespace or ms.namespace, ref.name) == (
            meta.get("namespace") or ms.namespace,
            meta["name"],
        )
        return module_from_config_map(config_map, ref.key, max_module_bytes)

    return ChainCache(sandbox=sandbox).get(ms, (str(meta.get("resourceVersion", "-")),), modules)


def rendered_pod(ms: ModelServing, chain: Chain) -> dict[str, Any]:
    pods = [o for o in render(ms, chain).objects if o["kind"] == "Pod"]
    assert len(pods) == 1
    return pods[0]
