// Fork client for session/interop_ts_test.go: with the official ACP
// TypeScript SDK, opens a session, runs two prompts, forks it with
// session/fork and with the /fork command, and prompts each fork (the
// /fork one after session/load). Prints one JSON summary line on stdout.
//
// usage: node fork.mjs <workspace> <acpd binary> [acpd flags...]
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { format } from "node:util";
import * as acp from "@agentclientprotocol/sdk";

const [workspace, bin, ...acpdArgs] = process.argv.slice(2);
const summary = { sdkErrors: [], texts: {}, users: {} };
const emit = () => process.stdout.write(JSON.stringify(summary) + "\n");
const consoleError = console.error;
console.error = (...args) => {
  summary.sdkErrors.push(format(...args));
  consoleError(...args);
};
const watchdog = setTimeout(() => {
  summary.fatal = "fork client timed out";
  emit();
  process.exit(2);
}, 90_000);

const child = spawn(bin, acpdArgs, { stdio: ["pipe", "pipe", "inherit"] });
const wire = process.env.ACPD_INTEROP_WIRE;
function tap(dir) {
  let buf = "";
  return (chunk) => {
    buf += Buffer.from(chunk).toString("utf8");
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      if (line.trim() !== "") {
        appendFileSync(wire, JSON.stringify({ dir, line }) + "\n");
      }
    }
  };
}
const toAgent = tap("client");
const write = child.stdin.write.bind(child.stdin);
child.stdin.write = (chunk, ...rest) => {
  toAgent(chunk);
  return write(chunk, ...rest);
};
child.stdout.on("data", tap("agent"));
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));

// label is the step whose agent text and replayed user messages are kept.
let label = "";
const app = acp
  .client({ name: "acpd-fork" })
  .onRequest("session/request_permission", async ({ params }) => ({
    outcome: { outcome: "selected", optionId: params.options[0].optionId },
  }))
  .onNotification("session/update", ({ params }) => {
    const u = params.update;
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") {
      summary.texts[label] = (summary.texts[label] ?? "") + u.content.text;
    } else if (u.sessionUpdate === "user_message_chunk" && u.content.type === "text") {
      (summary.users[label] ??= []).push(u.content.text);
    }
  });

async function prompt(agent, sessionId, name, text) {
  label = name;
  const r = await agent.request("session/prompt", { sessionId, prompt: [{ type: "text", text }] });
  await new Promise((resolve) => setImmediate(resolve));
  return r.stopReason;
}

try {
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  await app.connectWith(stream, async (agent) => {
    const init = await agent.request("initialize", {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities: { fs: { readTextFile: false, writeTextFile: false }, terminal: false },
      clientInfo: { name: "acpd-fork", version: "1.0.0" },
    });
    summary.forkCapability = init.agentCapabilities?.sessionCapabilities?.fork ?? null;
    const created = await agent.request("session/new", { cwd: workspace, mcpServers: [] });
    const source = created.sessionId;
    summary.source = source;
    await prompt(agent, source, "first", "the word is kiwi");
    await prompt(agent, source, "second", "and the number is 7");

    const forked = await agent.request("session/fork", { sessionId: source, cwd: workspace, mcpServers: [] });
    summary.forked = forked.sessionId;
    summary.forkModes = forked.modes?.currentModeId ?? null;
    await prompt(agent, forked.sessionId, "in-fork", "what was the word?");

    await prompt(agent, source, "slash-fork", "/fork 1");
    const m = /session (\S+) /.exec(summary.texts["slash-fork"] ?? "");
    summary.slashForked = m ? m[1] : null;
    if (summary.slashForked) {
      label = "load";
      await agent.request("session/load", { sessionId: summary.slashForked, cwd: workspace, mcpServers: [] });
      await new Promise((resolve) => setImmediate(resolve));
      await prompt(agent, summary.slashForked, "in-slash-fork", "and the number?");
    }
    await prompt(agent, source, "source-after", "still there?");
  });
} catch (err) {
  summary.fatal = String(err?.stack ?? err);
}
child.stdin.end();
summary.exit = await exited;
clearTimeout(watchdog);
emit();
