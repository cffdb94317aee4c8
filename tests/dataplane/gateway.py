"""The gateway's part of a request, played by the test: Envoy's ext_proc client of the endpoint
picker (EPP), then the HTTP hop to the endpoint the EPP picked.

What Envoy does for an InferencePool backend (Gateway API Inference Extension, the protocol the
llm-d router v0.9.0 serves in pkg/epp/handlers/server.go and request.go): it opens one ext_proc
``Process`` stream per HTTP request, sends the request headers, then the body with
``end_of_stream``; the EPP answers with a header mutation (``x-gateway-destination-endpoint``:
``ip:port`` of the picked endpoint, plus the headers its plugins set, e.g. the prefiller's
address for the P/D sidecar) and the (possibly rewritten) body, or with an ``ImmediateResponse``
(429 for a full priority band or a shed request, 503 with no endpoint, ...). Envoy then sends the
request to that endpoint and streams the response headers and body back through the same ext_proc
stream, which is where the EPP's response plugins and request metrics run.

This client does exactly those steps over gRPC (grpcio, Envoy's protos from ``xds-protos``) with
TLS checked against the control plane's CA. Only this client is a stand-in: the EPP, the P/D
sidecar and the engines are the real programs (docs/dataplane.md).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field

import grpc
import httpx
from envoy.config.core.v3 import base_pb2
from envoy.service.ext_proc.v3 import external_processor_pb2 as pb
from envoy.service.ext_proc.v3 import external_processor_pb2_grpc as pb_grpc

DESTINATION_HEADER = "x-gateway-destination-endpoint"  # llm-d-router v0.9.0 pkg/epp/metadata/consts.go
DROPPED_REASON_HEADER = "x-llm-d-request-dropped-reason"
# Headers Envoy owns: never copied onto the upstream request from the EPP's mutation.
_PSEUDO = (":method", ":path", ":authority", ":scheme", "content-length")


@dataclass
class Reply:
    """One request as the client saw it."""

    status: int
    endpoint: str | None = None  # ip:port the EPP picked (None when it answered itself)
    body: bytes = b""
    headers: dict = field(default_factory=dict)  # the EPP's header mutation (or its ImmediateResponse headers)
    sent_at: float = 0.0
    routed_at: float | None = None  # when the EPP's routing decision arrived (admission)
    done_at: float = 0.0

    @property
    def admission_seconds(self) -> float | None:
        return None if self.routed_at is None else self.routed_at - self.sent_at


def _header_map(headers: dict) -> base_pb2.HeaderMap:
    return base_pb2.HeaderMap(headers=[base_pb2.HeaderValue(key=k, raw_value=v.encode()) for k, v in headers.items()])


def _set_headers(mutation) -> dict:
    out = {}
    for opt in mutation.set_headers:
        h = opt.header
        out[h.key.lower()] = h.raw_value.decode() if h.raw_value else h.value
    return out


class Gateway:
    """One ext_proc channel to the EPP and one HTTP client to the endpoints (use in one event loop)."""

    def __init__(self, grpc_target: str, ca_pem: bytes, timeout: float = 120.0):
        self.grpc_target = grpc_target
        self.ca_pem = ca_pem
        self.timeout = timeout
        self._channel = None
        self._stub = None
        self._http = None

    async def __aenter__(self) -> Gateway:
        creds = grpc.ssl_channel_credentials(root_certificates=self.ca_pem)
        self._channel = grpc.aio.secure_channel(self.grpc_target, creds)
        self._stub = pb_grpc.ExternalProcessorStub(self._channel)
        self._http = httpx.AsyncClient(
            timeout=self.timeout, limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200)
        )
        return self

    async def __aexit__(self, *exc) -> None:
        await self._http.aclose()
        await self._channel.close()

    async def post(self, path: str, body: bytes, headers: dict | None = None) -> Reply:
        """POST ``body`` (JSON bytes) to ``path`` through the EPP's routing decision."""
        req_headers = {
            ":method": "POST",
            ":path": path,
            ":authority": "gateway.local",
            ":scheme": "http",
            "content-type": "application/json",
            "x-request-id": str(uuid.uuid4()),
            **{k.lower(): v for k, v in (headers or {}).items()},
        }
        reply = Reply(status=0, sent_at=time.monotonic())
        call = self._stub.Process()
        try:
            await call.write(pb.ProcessingRequest(request_headers=pb.HttpHeaders(headers=_header_map(req_headers))))
            await call.write(pb.ProcessingRequest(request_body=pb.HttpBody(body=body, end_of_stream=True)))
            routed, new_body = await self._routing(call, reply)
            if not routed:
                return reply
            await self._forward(call, path, req_headers, new_body if new_body is not None else body, reply)
        finally:
            reply.done_at = time.monotonic()
            call.cancel()
        return reply

    async def _routing(self, call, reply: Reply) -> tuple[bool, bytes | None]:
        """Read the EPP's answer to the request: (routed?, the body it sends upstream)."""
        chunks: list[bytes] = []
        while True:
            resp = await call.read()
            if resp is grpc.aio.EOF:
                raise RuntimeError("the EPP closed the ext_proc stream without a routing decision")
            kind = resp.WhichOneof("response")
            if kind == "immediate_response":
                ir = resp.immediate_response
                reply.status = int(ir.status.code)
                reply.body = ir.body
                reply.headers = _set_headers(ir.headers)
                reply.routed_at = None
                return False, None
            if kind == "request_headers":
                reply.routed_at = time.monotonic()
                reply.headers = _set_headers(resp.request_headers.response.header_mutation)
                reply.endpoint = reply.headers.get(DESTINATION_HEADER, "").split(",")[0].strip() or None
                continue
            if kind == "request_body":
                mutation = resp.request_body.response.body_mutation
                which = mutation.WhichOneof("mutation")
                if which == "streamed_response":
                    chunks.append(mutation.streamed_response.body)
                    if mutation.streamed_response.end_of_stream:
                        return True, b"".join(chunks)
                elif which == "body":
                    return True, mutation.body
                else:
                    return True, None
                continue
            raise RuntimeError(f"unexpected ext_proc response {kind!r} before routing")

    async def _forward(self, call, path: str, req_headers: dict, body: bytes, reply: Reply) -> None:
        if not reply.endpoint:
            raise RuntimeError(f"the EPP routed without {DESTINATION_HEADER}: {reply.headers}")
        upstream = {k: v for k, v in {**req_headers, **reply.headers}.items() if k not in _PSEUDO}
        drain = asyncio.ensure_future(self._drain(call))
        async with self._http.stream("POST", f"http://{reply.endpoint}{path}", headers=upstream, content=body) as r:
            reply.status = r.status_code
            resp_headers = {":status": str(r.status_code), **{k.lower(): v for k, v in r.headers.items()}}
            await call.write(pb.ProcessingRequest(response_headers=pb.HttpHeaders(headers=_header_map(resp_headers))))
            parts = []
            async for chunk in r.aiter_raw():
                parts.append(chunk)
                await call.write(pb.ProcessingRequest(response_body=pb.HttpBody(body=chunk, end_of_stream=False)))
            await call.write(pb.ProcessingRequest(response_body=pb.HttpBody(body=b"", end_of_stream=True)))
            reply.body = b"".join(parts)
        await call.done_writing()
        await asyncio.wait_for(drain, timeout=30)

    @staticmethod
    async def _drain(call) -> None:
        while await call.read() is not grpc.aio.EOF:
            pass
