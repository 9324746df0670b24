"""The controller's Kubernetes API access: plain JSON over the client's connection pool.

The generated client turns every object into typed models, which costs far more than the plugin
chain for a Pod; the reconciler only needs dicts, so ``Kube`` sends and reads JSON through the
``kubernetes`` client's authenticated REST layer. Calls are synchronous and thread-safe; the
reconciler runs them on worker threads. Errors the caller acts on are ``ApiError`` with the HTTP
status; ``NotFound``/``Conflict`` are its named cases.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import orjson
from kubernetes import client, config

from modelserving.api import labels
from modelserving.controller.pacing import WritePacer, retry_after_seconds


def loads(data: bytes | str) -> Any:
    """JSON as the API server sends it, decoded by orjson (about half the time of ``json``'s
    for a Pod; decoding watch events and answers was 14 % of the controller's CPU in a
    10,000-Pod rolling update). What orjson refuses and ``json`` reads (NaN, Infinity) is read
    by ``json``. The one other difference, an integer outside int64 and uint64 (orjson makes it
    a float), never comes from an API server: it reads every number as an int64 or a
    float64."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


JSON = "application/json"
METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1, application/json"
"""Accept for an answer of the object's metadata only (a ``PartialObjectMetadata``); an API
server that cannot give it answers with the whole object."""
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
REQUEST_TIMEOUT_S = 30.0
THROTTLED_RETRIES = 5
"""How many times a paced write answered 429 is sent again (client-go's default is 10)."""


class ApiError(Exception):
    """An API request failed; ``status`` is the HTTP status (0 when no answer came)."""

    def __init__(self, status: int, method: str, path: str, message: str) -> None:
        self.status = status
        self.reason = message
        self.retry_after_s = 1.0
        """What the answer's ``Retry-After`` asked for (a 429's), in seconds."""
        super().__init__(f"{method} {path}: {status} {message}")

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409


@dataclass(frozen=True)
class Resource:
    """Where a kind of object lives in the API."""

    group: str
    version: str
    plural: str

    def path(self, namespace: str | None, name: str | None = None, sub: str | None = None) -> str:
        base = f"/api/{self.version}" if not self.group else f"/apis/{self.group}/{self.version}"
        if namespace:  # None or "": cluster-scoped (or every namespace)
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
        if sub is not None:
            base += f"/{sub}"
        return base


PODS = Resource("", "v1", "pods")
SERVICES = Resource("", "v1", "services")
CONFIG_MAPS = Resource("", "v1", "configmaps")
MODEL_SERVINGS = Resource(labels.GROUP, labels.VERSION, labels.PLURAL)
CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions")
POD_GROUPS = Resource("scheduling.volcano.sh", "v1beta1", "podgroups")
CRDS = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions")
NODES = Resource("", "v1", "nodes")


def api_client(kubeconfig: str | None = None, pool_size: int = 32) -> Any:
    """An authenticated ``ApiClient``: the kubeconfig given, else in-cluster, else the default
    kubeconfig (``$KUBECONFIG`` or ``~/.kube/config``)."""
    configuration = client.Configuration()
    if kubeconfig:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=configuration
        )
    else:
        try:
            config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
        except config.ConfigException:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration
            )
    configuration.connection_pool_maxsize = pool_size
    return client.ApiClient(configuration)


class Kube:
    """JSON requests to the API server through one ``kubernetes.client.ApiClient``."""

    def __init__(self, api: Any, pacer: WritePacer | None = None) -> None:
        self.api = api
        self.pacer = pacer
        """Paces the writes (every method but GET) when set."""
        self._requests = itertools.count()
        self._sent = 0

    @property
    def requests(self) -> int:
        """Requests sent so far (for the benchmarks)."""
        return self._sent

    @property
    def configuration(self) -> Any:
        return self.api.configuration

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        content_type: str = JSON,
        accept: str = JSON,
    ) -> Any:
        """Send one request; the decoded JSON answer, or ApiError for any non-2xx status. With
        a pacer, a write waits for a slot, and one answered 429 is sent again after its
        ``Retry-After`` (at most ``THROTTLED_RETRIES`` times)."""
        if self.pacer is None or method == "GET":
            return self._send(method, path, body, query, content_type, accept)
        for attempt in itertools.count():
            try:
                with self.pacer.slot():
                    return self._send(method, path, body, query, content_type, accept)
            except ApiError as exc:
                if exc.status != 429 or attempt >= THROTTLED_RETRIES:
                    raise
                self.pacer.throttled(exc.retry_after_s)
        raise AssertionError("unreachable")

    def _send(
        self,
        method: str,
        path: str,
        body: Any,
        query: dict[str, str] | None,
        content_type: str,
        accept: str,
    ) -> Any:
        self._sent = next(self._requests) + 1
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        self.api.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        url = self.configuration.host + path + ("?" + urlencode(query) if query else "")
        try:
            response = self.api.rest_client.request(
                method, url, headers=headers, body=body, _request_timeout=REQUEST_TIMEOUT_S
            )
            data = response.read()
        except client.ApiException as exc:
            error = ApiError(int(exc.status or 0), method, path, str(exc.reason))
            error.retry_after_s = retry_after_seconds(exc.headers)
            raise error from None
        except OSError as exc:
            raise ApiError(0, method, path, str(exc)) from None
        if not 200 <= response.status <= 299:
            error = ApiError(response.status, method, path, _message(data))
            error.retry_after_s = retry_after_seconds(response.getheaders())
            raise error
        return loads(data) if data else None

    def stream(
        self,
        res: Resource,
        namespace: str | None,
        query: dict[str, str],
        read_timeout: float,
        accept: str = JSON,
    ) -> Any:
        """A GET whose answer is read as it comes (a watch): urllib3's response, whose lines
        are its events; ApiError for a non-2xx status. The caller releases it."""
        path = res.path(namespace)
        headers = {"Accept": accept}
        self.api.update_params_for_auth(headers, [], ["BearerToken"], path, "GET", None)
        url = self.configuration.host + path + "?" + urlencode(query)
        # the client's REST layer does not read the body: ``.response`` is urllib3's, streamed
        raw = self.api.rest_client.request(
            "GET", url, headers=headers, _request_timeout=(10, read_timeout)
        ).response
        if not 200 <= raw.status <= 299:
            raw.release_conn()
            raise ApiError(raw.status, "GET", path, "watch refused")
        return raw

    # --- generic verbs -------------------------------------------------------------------

    def get(self, res: Resource, namespace: str | None, name: str) -> dict[str, Any] | None:
        try:
            got: dict[str, Any] = self.request("GET", res.path(namespace, name))
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        return got

    def list_at(
        self, res: Resource, namespace: str | None, selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Every object, and the resourceVersion the list was read at."""
        items: list[dict[str, Any]] = []
        query: dict[str, str] = {"limit": "500"}
        if selector:
            query["labelSelector"] = selector
        while True:
            page = self.request("GET", res.path(namespace), query=query)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion") or "")
            query["continue"] = token

    def list(
        self, res: Resource, namespace: str | None, selector: str | None = None
    ) -> list[dict[str, Any]]:
        """Every object (a consistent read, paged by 500)."""
        return self.list_at(res, namespace, selector)[0]

    def create(
        self,
        res: Resource,
        namespace: str,
        body: dict[str, Any],
        field_manager: str | None = None,
        *,
        as_sent: bool = False,
    ) -> dict[str, Any] | None:
        """The created object, or None when one of that name already exists.

        ``as_sent``: the answer carries the new object's metadata only, and the object returned
        is ``body`` with that metadata and without a status (so without what the API server
        defaulted). The server encodes, and the controller decodes, less: for the Pods of
        examples/prefill-decode.yaml 2.2 KB instead of 3.6 KB (most of the metadata is its
        ``managedFields``)."""
        query = {"fieldManager": field_manager} if field_manager else None
        accept = METADATA if as_sent else JSON
        try:
            got: dict[str, Any] = self.request(
                "POST", res.path(namespace), body, query, accept=accept
            )
        except ApiError as exc:
            if exc.conflict:
                return None
            raise
        if not as_sent or got.get("kind") != "PartialObjectMetadata":
            return got
        made = {k: v for k, v in body.items() if k not in ("metadata", "status")}
        made["metadata"] = got.get("metadata") or {}
        return made

    def delete(
        self,
        res: Resource,
        namespace: str,
        name: str,
        uid: str | None = None,
        force: bool = False,
    ) -> bool:
        """Delete (in the background); False when it was already gone or is another object.
        ``force``: with a grace period of 0 (for a Pod whose Node is gone)."""
        body: dict[str, Any] = {"propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        if force:
            body["gracePeriodSeconds"] = 0
        try:  # the answer is not read: only its metadata is asked for
            self.request("DELETE", res.path(namespace, name), body, accept=METADATA)
        except ApiError as exc:
            if exc.not_found or exc.conflict:
                return False
            raise
        return True

    def merge_patch(
        self,
        res: Resource,
        namespace: str,
        name: str,
        patch: dict[str, Any],
        sub: str | None = None,
    ) -> dict[str, Any]:
        got: dict[str, Any] = self.request(
            "PATCH", res.path(namespace, name, sub), patch, content_type=MERGE_PATCH
        )
        return got

    def apply(
        self, res: Resource, namespace: str, body: dict[str, Any], field_manager: str
    ) -> dict[str, Any]:
        """Server-side apply of ``body`` as ``field_manager``, forcing conflicts (the fields
        it applied before and leaves out are removed). Its ``metadata.resourceVersion``, when
        set, is a precondition: a conflict is an ApiError 409."""
        name = body["metadata"]["name"]
        query = {"fieldManager": field_manager, "force": "true"}
        got: dict[str, Any] = self.request(
            "PATCH", res.path(namespace, name), body, query, content_type=APPLY_PATCH
        )
        return got

    def adopt_updates(
        self, res: Resource, obj: dict[str, Any], field_manager: str
    ) -> dict[str, Any]:
        """Turn the fields ``field_manager`` wrote by create or update into fields it applied
        (its ``Update`` entry of ``metadata.managedFields`` merged into its ``Apply`` entry), so
        that its next apply may remove them; ``obj`` unchanged when there is nothing to turn.
        The object's resourceVersion is a precondition (409 when it moved on)."""
        meta = obj["metadata"]
        entries = adopted_fields(meta.get("managedFields") or [], field_manager)
        if entries is None:
            return obj
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": meta["resourceVersion"]},
            {"op": "replace", "path": "/metadata/managedFields", "value": entries},
        ]
        path = res.path(meta.get("namespace"), meta["name"])
        got: dict[str, Any] = self.request("PATCH", path, patch, content_type=JSON_PATCH)
        return got

    def has_resource(self, res: Resource) -> bool:
        """Whether the API serves ``res`` (e.g. Volcano's PodGroup CRD is installed)."""
        base = f"/apis/{res.group}/{res.version}" if res.group else f"/api/{res.version}"
        try:
            found = self.request("GET", base)
        except ApiError as exc:
            if exc.not_found or exc.status == 503:
                return False
            raise
        return any(r.get("name") == res.plural for r in found.get("resources") or [])


def adopted_fields(entries: list[dict[str, Any]], manager: str) -> list[dict[str, Any]] | None:
    """``entries`` (managedFields) with ``manager``'s main-resource ``Update`` entry made part of
    its ``Apply`` entry; None when it has no such entry."""
    updates = [
        e
        for e in entries
        if e.get("manager") == manager
        and e.get("operation") == "Update"
        and not e.get("subresource")
    ]
    if not updates:
        return None
    applied = next(
        (e for e in entries if e.get("manager") == manager and e.get("operation") == "Apply"),
        None,
    )
    merged = dict(updates[0] if applied is None else applied)
    merged["operation"] = "Apply"
    fields = merged.get("fieldsV1") or {}
    for e in updates:
        fields = _union(fields, e.get("fieldsV1") or {})
    merged["fieldsV1"] = fields
    out = [e for e in entries if e is not applied and not any(e is u for u in updates)]
    return [*out, merged]


def _union(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The union of two FieldsV1 sets (nested maps of field keys)."""
    out = dict(a)
    for key, value in b.items():
        out[key] = _union(out[key], value) if key in out else value
    return out


def _message(data: bytes) -> str:
    try:
        status = json.loads(data)
    except ValueError:
        return data[:200].decode(errors="replace")
    if isinstance(status, dict):
        return str(status.get("message") or status.get("reason") or "")
    return ""
