-- A headless Neovim session with `autogradlint lsp` attached, as a user's config attaches it:
-- open the file, wait for the diagnostics, hover the first one, apply its quick fix through the
-- client, and write what was seen as JSON. Used by tests/test_neovim.py (Neovim 0.7+).
local file = assert(os.getenv("AGL_FILE"))
local out = assert(os.getenv("AGL_OUT"))
local cmd = vim.split(assert(os.getenv("AGL_CMD")), "\t")
local seen = { diagnostics = {}, after = {} }

local function finish()
  local handle = assert(io.open(out, "w"))
  handle:write(vim.fn.json_encode(seen))
  handle:close()
  vim.cmd("qa!")
end

-- Neovim's diagnostics, and each as the LSP diagnostic it came from (for the code action).
local function codes(buf)
  local found = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    local extra = d.user_data and d.user_data.lsp or {}
    local code = d.code or extra.code
    local lsp = {
      range = {
        start = { line = d.lnum, character = d.col },
        ["end"] = { line = d.end_lnum or d.lnum, character = d.end_col or d.col },
      },
      severity = d.severity,
      code = code,
      source = d.source,
      message = d.message,
      data = extra.data,
    }
    table.insert(found, { code = code, line = d.lnum, message = d.message, lsp = lsp })
  end
  return found
end

local function session()
vim.cmd("edit " .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
local client_id = vim.lsp.start_client({
  name = "autogradlint",
  cmd = cmd,
  root_dir = vim.fn.fnamemodify(file, ":h"),
})
if not client_id then
  seen.error = "the client did not start"
  return
end
vim.lsp.buf_attach_client(buf, client_id)
if not vim.wait(60000, function() return #vim.diagnostic.get(buf) > 0 end, 50) then
  seen.error = "no diagnostics arrived"
  return
end
seen.diagnostics = codes(buf)
local client = vim.lsp.get_client_by_id(client_id)
local first = seen.diagnostics[1].lsp
local document = { uri = vim.uri_from_bufnr(buf) }

local hover = client.request_sync("textDocument/hover", {
  textDocument = document,
  position = first.range.start,
}, 30000, buf)
local contents = hover and hover.result and hover.result.contents
seen.hover = type(contents) == "table" and (contents.value or vim.inspect(contents)) or contents

local actions = client.request_sync("textDocument/codeAction", {
  textDocument = document,
  range = first.range,
  context = { diagnostics = { first } },
}, 30000, buf)
seen.actions = {}
local chosen
for _, action in ipairs(actions and actions.result or {}) do
  table.insert(seen.actions, action.title)
  if not chosen and action.edit and not action.title:find("noqa") then
    chosen = action
  end
end
if not chosen then
  seen.error = "no quick fix with an edit"
  return
end
seen.applied = chosen.title
vim.lsp.util.apply_workspace_edit(chosen.edit, client.offset_encoding or "utf-16")
seen.text = table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n")
-- the edit is sent to the server as a change; the first finding must go away
vim.wait(60000, function()
  for _, d in ipairs(codes(buf)) do
    if d.code == first.code and d.line == first.range.start.line then
      return false
    end
  end
  return true
end, 50)
seen.after = codes(buf)
end

local ok, err = pcall(session)
if not ok then
  seen.error = tostring(err)
end
finish()
