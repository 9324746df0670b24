"""``modelserving render``: the Pods and Services the controller would create, offline.

The command's implementation; its arguments and description are in ``cli.render_args``, which
imports this module when the command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from modelserving import collector
from modelserving.api.errors import ModelServingError, PluginConfigError, PluginFailure
from modelserving.api.labels import API_VERSION, KIND
from modelserving.api.modelserving import ModelServing
from modelserving.api.operator import OperatorConfig
from modelserving.api.validation import object_ref, parse_model_serving
from modelserving.chain import Outcome, build_chain
from modelserving.chain.policy import PatchValidator
from modelserving.chain.render import Rendered, render
from modelserving.cli.manifests import ManifestError, dump_stream, read_documents
from modelserving.controller.config import load_config
from modelserving.plugins.exports import default_sandbox
from modelserving.plugins.modules import ConfigMapModules
from modelserving.workload.plan import refusal

ConfigMaps = dict[tuple[str, str], dict[str, Any]]


class RenderError(ModelServingError):
    """A plugin of one ModelServing could not be built or run; the message names the object."""


def _explain(pod_name: str, outcomes: list[Outcome]) -> str:
    if not outcomes:
        return f"Pod {pod_name}: no plugin in scope"
    lines = [f"Pod {pod_name}: plugins in order"]
    for o in outcomes:
        mode = ", mode Monitor: not applied" if o.monitored else ""
        head = f"  {o.plugin} (spec.plugins[{o.index}], {o.runtime}{mode})"
        if o.failure is not None:
            why = "would fail" if o.monitored else "ignored (failurePolicy Ignore)"
            lines.append(f"{head}: {why}: {o.failure}")
            continue
        lines.append(f"{head}: {len(o.patch)} operation(s)")
        lines.extend(f"    {json.dumps(op, sort_keys=True)}" for op in o.patch)
    return "\n".join(lines)


def _render(
    ms: ModelServing, gang: bool, config_maps: ConfigMaps, config: OperatorConfig
) -> Rendered:
    """Build the chain and render; plugin errors are prefixed with the ModelServing's name, so
    that with several files the reader knows which object is wrong. A module's ConfigMap is
    read from another namespace only when ``config`` lists it (``pluginNamespaces``), as the
    controller reads it."""
    sandbox = default_sandbox()
    modules = ConfigMapModules(
        config_maps,
        ms.namespace,
        sandbox.settings.max_module_bytes,
        frozenset(config.plugin_namespaces),
    )
    validator = PatchValidator(config.patch_policy)
    try:
        chain = build_chain(ms, validator=validator, modules=modules, sandbox=sandbox)
        return render(ms, chain, gang=gang)
    except (PluginConfigError, PluginFailure) as exc:
        raise RenderError(f"{ms.ref}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    with collector.tuned():  # a render of thousands of Pods allocates as a controller pass does
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    config = load_config(args.config) if args.config else OperatorConfig()
    manifests: list[dict[str, Any]] = []
    for path in args.files:
        for doc in read_documents(path):
            meta = doc.get("metadata")
            if isinstance(meta, dict) and not meta.get("namespace"):
                doc = {**doc, "metadata": {**meta, "namespace": args.namespace}}
            manifests.append(doc)
    model_servings = [d for d in manifests if d.get("kind") == KIND]
    config_maps: ConfigMaps = {
        (d["metadata"]["namespace"], d["metadata"].get("name", "")): d
        for d in manifests
        if d.get("kind") == "ConfigMap" and isinstance(d.get("metadata"), dict)
    }
    for doc in manifests:
        if doc.get("kind") not in (KIND, "ConfigMap"):
            print(
                f"note: ignoring {object_ref(doc)}: render reads ModelServings and ConfigMaps",
                file=sys.stderr,
            )
    if not model_servings:
        raise ManifestError(f"no ModelServing ({API_VERSION}) in {', '.join(args.files)}")

    objects: list[dict[str, Any]] = []
    outcomes: dict[str, list[Outcome]] = {}
    for doc in model_servings:
        ms = parse_model_serving(doc)
        refused = refusal(ms, config.max_pods_per_model_serving)
        if refused is not None:
            raise RenderError(f"{ms.ref}: {refused}")
        rendered = _render(ms, args.volcano, config_maps, config)
        objects.extend(rendered.objects)
        for pod, pod_outcomes in rendered.outcomes.items():
            outcomes[f"{ms.namespace}/{pod}"] = pod_outcomes
            for o in pod_outcomes:
                if o.failure is not None and o.monitored:
                    print(
                        f"note: {ms.ref}: {o.failure} (mode Monitor: nothing blocked)",
                        file=sys.stderr,
                    )
                elif o.failure is not None:
                    print(
                        f"warning: {ms.ref}: {o.failure} (failurePolicy Ignore: Pod created "
                        "without this plugin's changes)",
                        file=sys.stderr,
                    )

    objects.sort(key=lambda o: (o["kind"], o["metadata"]["name"], o["metadata"]["namespace"]))
    comments = {}
    if args.explain:
        for i, obj in enumerate(objects):
            if obj["kind"] == "Pod":
                key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
                comments[i] = _explain(key, outcomes.get(key, []))
    sys.stdout.write(dump_stream(objects, comments))
    return 0
