// Subagents client for session/interop_subagents_test.go: drives the built
// acpd with the official ACP TypeScript SDK as an editor that advertises
// clientCapabilities.subagents and so sees each subagent run as a child
// session. Each scenario runs in a session of its own, whose first prompt
// names it ("SUB-<name>"). It prints one JSON line: per scenario every
// event in the order the client saw it — updates of the session and of its
// children (with the session id they came on), permission requests and
// their answers, the prompt's answer.
//
// usage: node subagents.mjs <workspace> <acpd binary> [acpd flags...]
import { drive, spawnAcpd, start } from "./harness.mjs";
import * as acp from "@agentclientprotocol/sdk/unstable";

const [workspace, bin, ...acpdArgs] = process.argv.slice(2);
const summary = { scenarios: {}, sdkErrors: [] };
const client = start(summary, "subagents client", 110_000);

const acpd = spawnAcpd(bin, acpdArgs);

// Scenario by session id: the parent's, and each announced child's.
const bySession = new Map();

const app = acp
  .client({ name: "acpd-subagents" })
  .onRequest("session/request_permission", async ({ params }) => {
    const sc = bySession.get(params.sessionId);
    sc?.events.push({ ev: "permission", session: params.sessionId, toolCallId: params.toolCall.toolCallId });
    const opt = params.options.find((o) => o.kind === "allow_once");
    sc?.events.push({ ev: "permission-answered", session: params.sessionId, toolCallId: params.toolCall.toolCallId });
    return { outcome: { outcome: "selected", optionId: opt.optionId } };
  })
  .onNotification("session/update", ({ params }) => {
    const u = params.update;
    let sc = bySession.get(params.sessionId);
    if (!sc) {
      // An update for a session the client was never told about.
      summary.unknown = (summary.unknown ?? 0) + 1;
      return;
    }
    const e = { ev: "update", session: params.sessionId, kind: u.sessionUpdate };
    if (u.toolCallId) e.toolCallId = u.toolCallId;
    if (u.status) e.status = u.status;
    if (u.content?.type === "text") e.text = u.content.text;
    if (u.sessionUpdate === "subagent_update") {
      e.child = u.sessionId;
      e.state = u.state ?? null;
      e.title = u.title ?? null;
      e.capabilities = u.capabilities ?? null;
      bySession.set(u.sessionId, sc);
    }
    sc.events.push(e);
    sc.onUpdate?.(params.sessionId, u);
  });

let agent;
async function open(name, mode) {
  const created = await agent.request("session/new", { cwd: workspace, mcpServers: [] });
  const sc = { events: [], sessionId: created.sessionId };
  bySession.set(created.sessionId, sc);
  summary.scenarios[name] = sc;
  await agent.request("session/set_mode", { sessionId: created.sessionId, modeId: mode });
  return sc;
}

async function prompt(sc, text) {
  const r = await agent.request("session/prompt", { sessionId: sc.sessionId, prompt: [{ type: "text", text }] });
  sc.events.push({ ev: "prompt", stopReason: r.stopReason });
  return r;
}

const scenarios = {
  // The child asks permission for its command; the client answers.
  async perm() {
    const sc = await open("perm", "default");
    await prompt(sc, "SUB-perm: delegate the echo");
  },
  // The client cancels the child while its slow command runs; the parent
  // goes on.
  async cancel() {
    const sc = await open("cancel", "yolo");
    const stopped = new Promise((resolve) => {
      sc.onUpdate = (sessionId, u) => {
        if (sessionId !== sc.sessionId && u.sessionUpdate === "tool_call" && u.status === "in_progress") {
          sc.onUpdate = undefined;
          sc.events.push({ ev: "cancel", session: sessionId });
          agent.notify("session/cancel", { sessionId }).then(resolve);
        }
      };
    });
    await prompt(sc, "SUB-cancel: delegate the slow command");
    await stopped;
  },
};

summary.exit = await drive(acp, app, acpd, summary, { name: "acpd-subagents", capabilities: { subagents: {} } }, async (a) => {
  agent = a;
  for (const run of Object.values(scenarios)) {
    await run();
  }
});
client.finish();
