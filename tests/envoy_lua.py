"""Run a rendered Envoy Lua filter (an EnvoyExtensionPolicy's inline script) on one request, in Lua 5.1 (the
dialect of Envoy's LuaJIT), with a stand-in for the stream handle of Envoy's Lua filter API: ``headers()``
(``get``, ``replace``, ``add``, ``remove``), ``body()`` (``length``, ``getBytes``, ``setBytes``) and
``respond``. The script is the product's; only the handle is played.
"""

from __future__ import annotations

from lupa import lua51  # a test dependency (pyproject [test])

HANDLE = r"""
return function(hdrs, body)
  local h, headers = {}, {}
  for k, v in pairs(hdrs) do headers[string.lower(k)] = v end
  local hobj = {}
  function hobj:get(k) return headers[string.lower(k)] end
  function hobj:replace(k, v) headers[string.lower(k)] = v end
  function hobj:add(k, v) headers[string.lower(k)] = v end
  function hobj:remove(k) headers[string.lower(k)] = nil end
  local bobj = nil
  if body ~= nil then
    bobj = {data = body}
    function bobj:length() return string.len(self.data) end
    function bobj:getBytes(i, n) return string.sub(self.data, i + 1, i + n) end
    function bobj:setBytes(s) self.data = s end
  end
  function h:headers() return hobj end
  function h:body() return bobj end
  function h:respond(rh, rb) h.response = {headers = rh, body = rb} end
  h.state = function() return headers, bobj and bobj.data, h.response end
  return h
end
"""


def run_on_request(script: str, headers: dict[str, str], body: str | None) -> dict:
    """{"headers", "body", "status" (None: passed on), "response"} after the script's envoy_on_request."""
    rt = lua51.LuaRuntime(unpack_returned_tuples=True)
    make = rt.execute(HANDLE)
    rt.execute(script)
    handle = make(rt.table_from(headers), body)
    rt.globals().envoy_on_request(handle)
    hdrs, data, response = handle.state()
    out = {"headers": dict(hdrs.items()), "body": data, "status": None, "response": None}
    if response is not None:
        rh = dict(response["headers"].items())
        out["status"] = int(rh[":status"])
        out["response"] = response["body"]
    return out
