// The autogradlint extension: starts `autogradlint lsp` over stdio for Python files.
"use strict";

const path = require("path");
const fs = require("fs");
const vscode = require("vscode");
const { LanguageClient, TransportKind } = require("vscode-languageclient/node");

let client;

// The executable: the setting, else the one beside the workspace's interpreter, else PATH.
function executable(config, env) {
  const configured = config.get("path", "");
  if (configured) {
    return configured;
  }
  const bin = process.platform === "win32" ? "Scripts" : "bin";
  const name = process.platform === "win32" ? "autogradlint.exe" : "autogradlint";
  for (const root of [env.VIRTUAL_ENV, env.CONDA_PREFIX]) {
    if (root) {
      const candidate = path.join(root, bin, name);
      if (fs.existsSync(candidate)) {
        return candidate;
      }
    }
  }
  return "autogradlint";
}

function serverOptions(config, env) {
  const run = {
    command: executable(config, env),
    args: ["lsp", ...config.get("args", [])],
    transport: TransportKind.stdio,
  };
  return { run, debug: run };
}

function clientOptions() {
  return {
    documentSelector: [
      { scheme: "file", language: "python" },
      { scheme: "untitled", language: "python" },
    ],
    synchronize: {
      // a change to the configuration or to any Python file can change another file's findings
      fileEvents: vscode.workspace.createFileSystemWatcher(
        "**/{*.py,*.pyi,pyproject.toml,.autogradlint.yaml}"
      ),
    },
  };
}

async function start() {
  const config = vscode.workspace.getConfiguration("autogradlint");
  if (!config.get("enable", true)) {
    return undefined;
  }
  client = new LanguageClient(
    "autogradlint",
    "autogradlint",
    serverOptions(config, process.env),
    clientOptions()
  );
  await client.start();
  return client;
}

async function stop() {
  if (client) {
    const running = client;
    client = undefined;
    await running.stop();
  }
}

async function activate(context) {
  context.subscriptions.push(
    vscode.commands.registerCommand("autogradlint.restart", async () => {
      await stop();
      await start();
    }),
    vscode.workspace.onDidChangeConfiguration(async (event) => {
      if (event.affectsConfiguration("autogradlint")) {
        await stop();
        await start();
      }
    })
  );
  await start();
}

function deactivate() {
  return stop();
}

module.exports = { activate, deactivate, executable, serverOptions };
