-- The edge escalation's body rewrite (Envoy Gateway Lua, on the escalation routes only). The regional
-- grid routes by the body's "model": the request leaves with the regional class's served name.
-- MODEL_JSON (that name as a JSON string) comes from the deployment intent.
function envoy_on_request(handle)
  local body = handle:body()
  if body == nil then
    return
  end
  local text = body:getBytes(0, body:length())
  local value = string.gsub(MODEL_JSON, "%%", "%%%%")
  local out, n = string.gsub(text, '("model"%s*:%s*)"[^"]*"', "%1" .. value, 1)
  if n == 0 then
    if string.match(text, "^%s*[{]%s*[}]%s*$") then
      out = '{"model":' .. MODEL_JSON .. "}"
    else
      out = string.gsub(text, "^%s*{", '{"model":' .. value .. ",", 1)
    end
  end
  body:setBytes(out)
  handle:headers():replace("content-length", tostring(string.len(out)))
end
