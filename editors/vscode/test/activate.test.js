// Drives the extension's activate/deactivate against stubs of the `vscode` API and the language
// client, as VS Code would: EXTENSION_DIR names the folder to load (the unpacked .vsix).
"use strict";

const test = require("node:test");
const assert = require("node:assert");
const Module = require("module");
const path = require("path");

const extensionDir = process.env.EXTENSION_DIR || path.join(__dirname, "..");

function stubs(settings) {
  const calls = { clients: [], commands: {}, watchers: [], configListeners: [] };
  const vscode = {
    workspace: {
      getConfiguration(section) {
        assert.strictEqual(section, "autogradlint");
        return { get: (key, fallback) => (key in settings ? settings[key] : fallback) };
      },
      createFileSystemWatcher(glob) {
        calls.watchers.push(glob);
        return { dispose() {} };
      },
      onDidChangeConfiguration(listener) {
        calls.configListeners.push(listener);
        return { dispose() {} };
      },
    },
    commands: {
      registerCommand(name, fn) {
        calls.commands[name] = fn;
        return { dispose() {} };
      },
    },
  };
  class LanguageClient {
    constructor(id, name, serverOptions, clientOptions) {
      Object.assign(this, { id, name, serverOptions, clientOptions, started: 0, stopped: 0 });
      calls.clients.push(this);
    }
    async start() {
      this.started += 1;
    }
    async stop() {
      this.stopped += 1;
    }
  }
  const client = { LanguageClient, TransportKind: { stdio: 0 } };
  return { vscode, client, calls };
}

function load(settings, env) {
  const { vscode, client, calls } = stubs(settings);
  const original = Module._load;
  Module._load = function (request, parent, isMain) {
    if (request === "vscode") return vscode;
    if (request === "vscode-languageclient/node") return client;
    return original.call(this, request, parent, isMain);
  };
  const main = path.join(extensionDir, require(path.join(extensionDir, "package.json")).main);
  delete require.cache[require.resolve(main)];
  const saved = { ...process.env };
  // the environment VS Code would start with: only what the test gives
  delete process.env.VIRTUAL_ENV;
  delete process.env.CONDA_PREFIX;
  Object.assign(process.env, env);
  try {
    return { extension: require(main), calls, restore: () => {
      Module._load = original;
      for (const key of ["VIRTUAL_ENV", "CONDA_PREFIX", ...Object.keys(env)]) {
        delete process.env[key];
      }
      Object.assign(process.env, saved);
    } };
  } catch (error) {
    Module._load = original;
    throw error;
  }
}

test("activation starts `autogradlint lsp` for Python files", async () => {
  const { extension, calls, restore } = load({ args: ["--config", "x.toml"] }, {});
  try {
    const context = { subscriptions: [] };
    await extension.activate(context);
    assert.strictEqual(calls.clients.length, 1);
    const [client] = calls.clients;
    assert.strictEqual(client.started, 1);
    assert.strictEqual(client.id, "autogradlint");
    assert.strictEqual(client.serverOptions.run.command, "autogradlint");
    assert.deepStrictEqual(client.serverOptions.run.args, ["lsp", "--config", "x.toml"]);
    const languages = client.clientOptions.documentSelector.map((s) => s.language);
    assert.deepStrictEqual([...new Set(languages)], ["python"]);
    assert.ok(calls.watchers[0].includes("pyproject.toml"));
    assert.ok("autogradlint.restart" in calls.commands);
    assert.strictEqual(context.subscriptions.length, 2);
    await extension.deactivate();
    assert.strictEqual(client.stopped, 1);
  } finally {
    restore();
  }
});

test("the path setting wins; restart replaces the client", async () => {
  const { extension, calls, restore } = load({ path: "/opt/tools/autogradlint" }, {});
  try {
    await extension.activate({ subscriptions: [] });
    await calls.commands["autogradlint.restart"]();
    assert.strictEqual(calls.clients.length, 2);
    assert.strictEqual(calls.clients[0].stopped, 1);
    assert.strictEqual(calls.clients[1].serverOptions.run.command, "/opt/tools/autogradlint");
    await extension.deactivate();
  } finally {
    restore();
  }
});

test("without a path setting, the environment's own autogradlint is used", async () => {
  const fs = require("fs");
  const os = require("os");
  const venv = fs.mkdtempSync(path.join(os.tmpdir(), "agl-venv-"));
  fs.mkdirSync(path.join(venv, "bin"));
  fs.writeFileSync(path.join(venv, "bin", "autogradlint"), "");
  const { extension, calls, restore } = load({}, { VIRTUAL_ENV: venv });
  try {
    await extension.activate({ subscriptions: [] });
    assert.strictEqual(calls.clients[0].serverOptions.run.command, path.join(venv, "bin", "autogradlint"));
    await extension.deactivate();
  } finally {
    restore();
    fs.rmSync(venv, { recursive: true, force: true });
  }
});

test("disabled: no server is started", async () => {
  const { extension, calls, restore } = load({ enable: false }, {});
  try {
    await extension.activate({ subscriptions: [] });
    assert.strictEqual(calls.clients.length, 0);
  } finally {
    restore();
  }
});
