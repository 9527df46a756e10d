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
import { drive, spawnAcpd, start } from "./harness.mjs";

const entry = process.env.ACPD_SDK_ENTRY || "@agentclientprotocol/sdk";
const acp = await import(entry);
const caps = process.env.ACPD_CAPS || "all";
const reads = Number(process.env.ACPD_READS || "4");
const [workspace, bin, ...acpdArgs] = process.argv.slice(2);
const summary = { entry, caps, updates: [], elicitations: [], steps: [], sdkErrors: [] };

const client = start(summary, "capability client", 100_000);

const acpd = spawnAcpd(bin, acpdArgs);

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

const capabilities = caps === "all" ? { session: { notices: {}, compaction: {} }, elicitation: { form: {} } } : {};
summary.exit = await drive(acp, app, acpd, summary, { name: "acpd-capable", capabilities }, async (agent) => {
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
client.finish();
