// Capability client for session/interop_caps_test.go: drives the built acpd
// with the official ACP TypeScript SDK, advertising session.notices,
// session.compaction and elicitation.form (ACPD_CAPS=all) or none of them
// (ACPD_CAPS=none), through the SDK's stable entry point or its /unstable
// one (ACPD_SDK_ENTRY). It plays: a prompt whose model asks the user a
// question, prompts that read files until the conversation is compacted,
// /compress, and a session/load of the same session; and prints one JSON
// line with every update it received (by step) and every elicitation.
//
// usage: node capable.mjs <workspace> <acpd binary> [acpd flags...]
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { format } from "node:util";

const entry = process.env.ACPD_SDK_ENTRY || "@agentclientprotocol/sdk";
const acp = await import(entry);
const caps = process.env.ACPD_CAPS || "all";
const reads = Number(process.env.ACPD_READS || "4");
const [workspace, bin, ...acpdArgs] = process.argv.slice(2);
const summary = { entry, caps, updates: [], elicitations: [], steps: [], sdkErrors: [] };

function emit() {
  process.stdout.write(JSON.stringify(summary) + "\n");
}

const consoleError = console.error;
console.error = (...args) => {
  summary.sdkErrors.push(format(...args));
  consoleError(...args);
};

const watchdog = setTimeout(() => {
  summary.fatal = "capability client timed out";
  emit();
  process.exit(2);
}, 100_000);

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
if (wire) {
  const toAgent = tap("client");
  const write = child.stdin.write.bind(child.stdin);
  child.stdin.write = (chunk, ...rest) => {
    toAgent(chunk);
    return write(chunk, ...rest);
  };
  child.stdout.on("data", tap("agent"));
}
const exited = new Promise((resolve) => {
  child.on("exit", (code, signal) => resolve({ code, signal }));
  child.on("error", (err) => resolve({ code: null, signal: null, error: String(err) }));
});

let step = "setup";

const app = acp
  .client({ name: "acpd-capable" })
  .onRequest("session/request_permission", async ({ params }) => {
    const opt = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: opt.optionId } };
  })
  .onRequest("elicitation/create", async ({ params }) => {
    summary.elicitations.push({ step, params });
    return { action: "accept", content: { answer_1: "Postgres" } };
  })
  .onNotification("session/update", ({ params }) => {
    const u = params.update;
    const rec = { step, kind: u.sessionUpdate };
    for (const k of ["toolCallId", "name", "status", "compactionId", "severity", "title", "description", "messageId", "error"]) {
      if (u[k] !== undefined && u[k] !== null) {
        rec[k] = u[k];
      }
    }
    if (u.content && u.content.type === "text") {
      rec.text = u.content.text;
    }
    summary.updates.push(rec);
  });

async function prompt(session, name, text) {
  step = name;
  try {
    const resp = await session.prompt(text);
    summary.steps.push({ name, stopReason: resp.stopReason });
  } catch (err) {
    summary.steps.push({ name, error: { code: err.code ?? null, message: err.message } });
  }
  await new Promise((resolve) => setImmediate(resolve));
}

try {
  const clientCapabilities = { fs: { readTextFile: false, writeTextFile: false }, terminal: false };
  if (caps === "all") {
    clientCapabilities.session = { notices: {}, compaction: {} };
    clientCapabilities.elicitation = { form: {} };
  }
  const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
  await app.connectWith(stream, async (agent) => {
    await agent.request("initialize", {
      protocolVersion: acp.PROTOCOL_VERSION,
      clientCapabilities,
      clientInfo: { name: "acpd-capable", version: "1.0.0" },
    });
    const session = await agent.buildSession(workspace).start();
    summary.sessionId = session.sessionId;
    await prompt(session, "ask", "set up the service");
    for (let i = 0; i < reads; i++) {
      await prompt(session, `read-${i}`, `Read src_${String(i).padStart(3, "0")}.go and summarise it.`);
    }
    await prompt(session, "compress", "/compress");
    step = "load";
    await agent.request("session/load", { sessionId: session.sessionId, cwd: workspace, mcpServers: [] });
    await new Promise((resolve) => setImmediate(resolve));
    step = "done";
    session.dispose();
  });
} catch (err) {
  summary.fatal = String(err?.stack ?? err);
}

child.stdin.end();
summary.exit = await exited;
clearTimeout(watchdog);
emit();
process.exitCode = summary.fatal ? 1 : 0;
