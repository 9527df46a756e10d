// Prompt-queueing client for session/interop_steering_test.go: with the
// official ACP TypeScript SDK, starts the built acpd twice — once opting in
// to prompt queueing (clientCapabilities._meta.promptQueueing), once not —
// and in each sends three prompts to one session without waiting: a slow
// one, a file command, a plain one. Prints one JSON line with each
// connection's initialize capabilities and its prompts' answers in the
// order they came.
//
// usage: node queue.mjs <workspace> <acpd binary> [acpd flags...]
import { spawn } from "node:child_process";
import { appendFileSync } from "node:fs";
import { Readable, Writable } from "node:stream";
import { format } from "node:util";
import * as acp from "@agentclientprotocol/sdk";

const [workspace, bin, ...acpdArgs] = process.argv.slice(2);
const summary = { runs: {}, sdkErrors: [] };
const emit = () => process.stdout.write(JSON.stringify(summary) + "\n");
const consoleError = console.error;
console.error = (...args) => {
  summary.sdkErrors.push(format(...args));
  consoleError(...args);
};
const watchdog = setTimeout(() => {
  summary.fatal = "queue client timed out";
  emit();
  process.exit(2);
}, 100_000);

function tap(wire, dir) {
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

async function run(name, wire, optIn) {
  const out = { answers: [], texts: [] };
  summary.runs[name] = out;
  const child = spawn(bin, acpdArgs, { stdio: ["pipe", "pipe", "inherit"] });
  const toAgent = tap(wire, "client");
  const write = child.stdin.write.bind(child.stdin);
  child.stdin.write = (chunk, ...rest) => {
    toAgent(chunk);
    return write(chunk, ...rest);
  };
  child.stdout.on("data", tap(wire, "agent"));
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  let started;
  const running = new Promise((resolve) => (started = resolve));
  const app = acp
    .client({ name: "acpd-queue" })
    .onRequest("session/request_permission", async ({ params }) => {
      const opt = params.options.find((o) => o.kind === "allow_once");
      return { outcome: { outcome: "selected", optionId: opt.optionId } };
    })
    .onNotification("session/update", ({ params }) => {
      const u = params.update;
      if ((u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") && u.status === "in_progress") {
        started();
      }
      if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") {
        out.texts.push(u.content.text);
      }
    });
  try {
    const stream = acp.ndJsonStream(Writable.toWeb(child.stdin), Readable.toWeb(child.stdout));
    await app.connectWith(stream, async (agent) => {
      const clientCapabilities = { fs: { readTextFile: false, writeTextFile: false }, terminal: false };
      if (optIn) {
        clientCapabilities._meta = { promptQueueing: true };
      }
      const init = await agent.request("initialize", {
        protocolVersion: acp.PROTOCOL_VERSION,
        clientCapabilities,
        clientInfo: { name: "acpd-queue", version: "1.0.0" },
      });
      out.agentMeta = init.agentCapabilities?._meta ?? null;
      const { sessionId } = await agent.request("session/new", { cwd: workspace, mcpServers: [] });
      await agent.request("session/set_mode", { sessionId, modeId: "yolo" });
      const send = (label, text) =>
        agent
          .request("session/prompt", { sessionId, prompt: [{ type: "text", text }] })
          .then((r) => out.answers.push({ label, stopReason: r.stopReason }))
          .catch((err) => out.answers.push({ label, error: String(err?.message ?? err) }));
      const first = send("first", `QUEUE-${name}: run the slow command`);
      await running;
      const second = send("second", "/blue queued");
      await new Promise((resolve) => setTimeout(resolve, 100));
      const third = send("third", "and the third");
      await Promise.all([first, second, third]);
    });
  } catch (err) {
    summary.fatal = String(err?.stack ?? err);
  }
  child.stdin.end();
  out.exit = await exited;
}

const wire = process.env.ACPD_INTEROP_WIRE;
await run("queued", wire, true);
if (!summary.fatal) {
  await run("default", wire + ".2", false);
}
clearTimeout(watchdog);
emit();
