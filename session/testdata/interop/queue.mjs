// Prompt-queueing client for session/interop_steering_test.go: with the
// official ACP TypeScript SDK, starts the built acpd twice — once opting in
// to prompt queueing (clientCapabilities._meta.promptQueueing), once not —
// and in each sends three prompts to one session without waiting: a slow
// one, a file command, a plain one. Prints one JSON line with each
// connection's initialize capabilities and its prompts' answers in the
// order they came.
//
// usage: node queue.mjs <workspace> <acpd binary> [acpd flags...]
import { drive, spawnAcpd, start } from "./harness.mjs";
import * as acp from "@agentclientprotocol/sdk";

const [workspace, bin, ...acpdArgs] = process.argv.slice(2);
const summary = { runs: {}, sdkErrors: [] };
const client = start(summary, "queue client", 100_000);

async function run(name, wire, optIn) {
  const out = { answers: [], texts: [] };
  summary.runs[name] = out;
  const acpd = spawnAcpd(bin, acpdArgs, wire);
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
  const capabilities = optIn ? { _meta: { promptQueueing: true } } : {};
  out.exit = await drive(acp, app, acpd, summary, { name: "acpd-queue", capabilities }, async (agent, init) => {
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
}

const wire = process.env.ACPD_INTEROP_WIRE;
await run("queued", wire, true);
if (!summary.fatal) {
  await run("default", wire + ".2", false);
}
client.finish();
