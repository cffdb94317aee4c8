-- The tier admission filter of the AI grid (Envoy Gateway Lua, after api_key_auth, before
-- ext_proc). `tenants`, the header names and the cascade figures come from the deployment intent.
local function refuse(handle, code, kind, message)
  handle:respond({[":status"] = tostring(code), ["content-type"] = "application/json"},
    string.format('{"error":{"type":"%s","code":%d,"message":"%s"}}', kind, code, message))
end

function envoy_on_request(handle)
  local headers = handle:headers()
  local tenant = headers:get(TENANT)
  local t = tenant and tenants[tenant]
  if t == nil then
    return -- no verified tenant: the SecurityPolicy has already refused the request
  end
  local body = handle:body()
  local text = body and body:getBytes(0, body:length()) or ""
  local model = string.match(text, '"model"%s*:%s*"([^"]*)"') or ""
  local asked = tonumber(string.match(text, '"max_completion_tokens"%s*:%s*(%d+)')
    or string.match(text, '"max_tokens"%s*:%s*(%d+)') or "")
  if asked ~= nil and asked > t.max_tokens then
    return refuse(handle, 400, "tier_limit", string.format(
      "max_tokens %d is above the %s tier's limit of %d", asked, t.tier, t.max_tokens))
  end
  local objective = t.objectives[model]
  if model == CASCADE_MODEL and #t.cascade > 0 then
    -- the same choice as the route's rules: an escalation header 1..ESCALATIONS, else a large content-length
    local level = 0
    local escalate = tonumber(headers:get(ESCALATE) or "")
    if escalate ~= nil and escalate >= 1 and escalate <= ESCALATIONS and escalate == math.floor(escalate) then
      level = escalate
    elseif LARGE_PROMPT > 0 and (tonumber(headers:get("content-length") or "") or 0) >= LARGE_PROMPT then
      level = 1
    end
    objective = t.cascade[math.min(level, #t.cascade - 1) + 1]
  end
  if objective == nil then
    local shown = string.gsub(model, "[^%w%.%-_/:]", "?")
    return refuse(handle, 403, "model_not_allowed", string.format(
      "model '%s' is not in tenant %s's plan", shown, tenant))
  end
  headers:replace(TIER, t.tier)
  headers:replace(OBJECTIVE, objective)
  headers:replace(FAIRNESS, tenant)
end
