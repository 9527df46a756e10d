// Steering client for session/interop_steering_test.go: drives the built
// acpd with the official ACP TypeScript SDK as an editor that steers turns
// with the _session/steering extension method. Each scenario runs in a
// session of its own, whose first prompt names it ("SCN-<name>"), so the
// test's model server scripts each apart. It prints one JSON line: the
// initialize answer's _meta, and per scenario every event in the order the
// client saw it (updates, steering answers, permission requests, prompt
// answers, the replay of a session/load).
//
// usage: node steering.mjs <workspace> <acpd binary> [acpd flags...]
import { drive, spawnAcpd, start } from "./harness.mjs";
import * as acp from "@agentclientprotocol/sdk";

const [workspace, bin, ...acpdArgs] = process.argv.slice(2);
const only = (process.env.ACPD_SCENARIOS || "").split(",").filter(Boolean);
const summary = { scenarios: {}, sdkErrors: [] };
const client = start(summary, "steering client", 110_000);

const acpd = spawnAcpd(bin, acpdArgs);

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Per session: the scenario's event list and its hooks.
const bySession = new Map();
function events(sessionId) {
  return bySession.get(sessionId)?.events ?? [];
}

function textOf(u) {
  return u.content?.type === "text" ? u.content.text : undefined;
}

const app = acp
  .client({ name: "acpd-steering" })
  .onRequest("session/request_permission", async ({ params }) => {
    const sc = bySession.get(params.sessionId);
    sc?.events.push({ ev: "permission", toolCallId: params.toolCall.toolCallId });
    if (sc?.onPermission) {
      await sc.onPermission(params);
    }
    sc?.events.push({ ev: "permission-answered", toolCallId: params.toolCall.toolCallId });
    const opt = params.options.find((o) => o.kind === "allow_once");
    return { outcome: { outcome: "selected", optionId: opt.optionId } };
  })
  .onNotification("session/update", ({ params }) => {
    const sc = bySession.get(params.sessionId);
    if (!sc) {
      return;
    }
    const u = params.update;
    const e = { ev: "update", kind: u.sessionUpdate };
    if (u.messageId) e.messageId = u.messageId;
    if (textOf(u) !== undefined) e.text = textOf(u);
    if (u.toolCallId) e.toolCallId = u.toolCallId;
    if (u.status) e.status = u.status;
    if (u._meta) e.meta = u._meta;
    if (sc.loading) e.replay = true;
    sc.events.push(e);
    sc.onUpdate?.(u);
  });

let agent;
async function open(name, mode) {
  const created = await agent.request("session/new", { cwd: workspace, mcpServers: [] });
  const sc = { events: [], sessionId: created.sessionId };
  bySession.set(created.sessionId, sc);
  summary.scenarios[name] = sc;
  if (mode) {
    await agent.request("session/set_mode", { sessionId: created.sessionId, modeId: mode });
  }
  return sc;
}

async function prompt(sc, text) {
  const r = await agent.request("session/prompt", { sessionId: sc.sessionId, prompt: [{ type: "text", text }] });
  sc.events.push({ ev: "prompt", stopReason: r.stopReason, meta: r._meta ?? null });
  return r;
}

async function steerMsg(sc, text, promptRequired) {
  const params = { sessionId: sc.sessionId, prompt: [{ type: "text", text }] };
  if (promptRequired) {
    params._meta = { steering: { idleBehavior: "promptRequired" } };
  }
  const r = await agent.request("_session/steering", params);
  sc.events.push({ ev: "steer", text, outcome: r.outcome, reason: r.reason ?? null, messageId: r._meta?.messageId ?? null });
  return r;
}

// replay closes the session and loads it again, recording the replay.
async function replay(sc) {
  await agent.request("session/close", { sessionId: sc.sessionId });
  sc.loading = true;
  await agent.request("session/load", { sessionId: sc.sessionId, cwd: workspace, mcpServers: [] });
  await new Promise((resolve) => setImmediate(resolve));
  sc.loading = false;
}

// running resolves once the session's tool call is in progress.
function running(sc) {
  return new Promise((resolve) => {
    sc.onUpdate = (u) => {
      if ((u.sessionUpdate === "tool_call" || u.sessionUpdate === "tool_call_update") && u.status === "in_progress") {
        sc.onUpdate = undefined;
        resolve();
      }
    };
  });
}

const scenarios = {
  // A steer during a slow tool lands after its result, in the same turn.
  async inject() {
    const sc = await open("inject", "yolo");
    const steered = running(sc).then(() => steerMsg(sc, "STEER-inject: use the blue file"));
    await prompt(sc, "SCN-inject: run the slow command");
    await steered;
    await replay(sc);
  },
  // Idle: startedNewTurn by default, promptRequired when asked.
  async idle() {
    const sc = await open("idle", "yolo");
    await prompt(sc, "SCN-idle: hello");
    await steerMsg(sc, "STEER-idle-required", true);
    await sleep(300);
    const answered = new Promise((resolve) => {
      let text = "";
      sc.onUpdate = (u) => {
        if (u.sessionUpdate === "agent_message_chunk") {
          text += textOf(u) ?? "";
          if (text.includes("detached answer")) {
            resolve();
          }
        }
      };
    });
    await steerMsg(sc, "STEER-idle-new");
    await answered;
    await sleep(300);
  },
  // A steer sent while a permission request waits is inserted after it.
  async permission() {
    const sc = await open("permission", "default");
    sc.onPermission = async () => {
      await steerMsg(sc, "STEER-permission: and list it too");
      await sleep(200);
    };
    await prompt(sc, "SCN-permission: echo something");
  },
  // A steer accepted just before session/cancel is never inserted.
  async cancel() {
    const sc = await open("cancel", "yolo");
    const cancelled = running(sc).then(async () => {
      await steerMsg(sc, "STEER-cancel: never mind that");
      await agent.notify("session/cancel", { sessionId: sc.sessionId });
    });
    await prompt(sc, "SCN-cancel: run the long command");
    await cancelled;
    await sleep(300);
    await replay(sc);
  },
  // Three steers in a row keep their order.
  async three() {
    const sc = await open("three", "yolo");
    const steered = running(sc).then(async () => {
      await steerMsg(sc, "STEER-3a");
      await steerMsg(sc, "STEER-3b");
      await steerMsg(sc, "STEER-3c");
    });
    await prompt(sc, "SCN-three: run the slow command");
    await steered;
  },
  // A file command in a steer is expanded; a built-in one is refused
  // while a turn runs.
  async command() {
    const sc = await open("command", "yolo");
    const steered = running(sc).then(async () => {
      try {
        await steerMsg(sc, "/help");
      } catch (err) {
        sc.events.push({ ev: "steer-error", code: err.code ?? null, message: String(err.message ?? err) });
      }
      await steerMsg(sc, "/blue now please");
    });
    await prompt(sc, "SCN-command: run the slow command");
    await steered;
  },
  // A side question (/btw) while the turn runs a slow tool, and another
  // once it ended; then the session is loaded again.
  async btw() {
    const sc = await open("btw", "yolo");
    const asked = running(sc).then(async () => {
      const r = await agent.request("session/prompt", {
        sessionId: sc.sessionId,
        prompt: [{ type: "text", text: "/btw BTW-question: which file?" }],
      });
      sc.events.push({ ev: "btw", stopReason: r.stopReason });
    });
    await prompt(sc, "SCN-btw: run the slow command");
    await asked;
    const r = await agent.request("session/prompt", {
      sessionId: sc.sessionId,
      prompt: [{ type: "text", text: "/btw BTW-idle: and now?" }],
    });
    sc.events.push({ ev: "btw", stopReason: r.stopReason });
    await replay(sc);
  },
  // A steer during the model's last answer is read in the same turn; one
  // after the answer, with promptRequired, starts nothing.
  async race() {
    const sc = await open("race", "yolo");
    const answered = prompt(sc, "SCN-race: answer slowly");
    await sleep(400);
    await steerMsg(sc, "STEER-race-in", true);
    await answered;
    await steerMsg(sc, "STEER-race-late", true);
    await sleep(400);
  },
};

summary.exit = await drive(acp, app, acpd, summary, { name: "acpd-steering" }, async (a, init) => {
  agent = a;
  summary.initMeta = init._meta ?? null;
  for (const [name, run] of Object.entries(scenarios)) {
    if (only.length === 0 || only.includes(name)) {
      await run();
    }
  }
});
client.finish();
