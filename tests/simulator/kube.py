"""Raw Kubernetes REST calls through a kubernetes.client.ApiClient (any resource, no discovery)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.rest import ApiException


def request(
    api,
    method: str,
    path: str,
    *,
    query: list | None = None,
    body: Any = None,
    content_type: str | None = None,
    timeout: Any = 30,
    stream: bool = False,
):
    """Send one request; return the decoded JSON (or the raw urllib3 response when stream).

    Raises ``ApiException`` (with ``status`` and ``body``) for non-2xx answers.
    """
    headers = {"Accept": "application/json"}
    if content_type:
        headers["Content-Type"] = content_type
    elif body is not None:
        headers["Content-Type"] = "application/json"
    m, url, hdrs, b, post = api.param_serialize(
        method=method,
        resource_path=path,
        query_params=query or [],
        header_params=headers,
        body=body,
        auth_settings=["BearerToken"],
    )
    resp = api.call_api(m, url, header_params=hdrs, body=b, post_params=post, _request_timeout=timeout)
    if not 200 <= resp.status < 300:
        data = resp.read()
        text = data.decode(errors="replace") if isinstance(data, bytes) else str(data)
        raise ApiException(status=resp.status, reason=resp.reason, body=text)
    if stream:
        return resp.response
    data = resp.read()
    return json.loads(data) if data else None
