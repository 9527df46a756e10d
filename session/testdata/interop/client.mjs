// Interop client for session/interop_ts_test.go: drives the built acpd with
// the official ACP TypeScript SDK over the daemon's real stdio and prints one
// JSON summary line on stdout, which the Go test asserts. Everything else
// (the SDK's complaints, acpd's own stderr) goes to stderr.
//
// usage: node client.mjs <workspace> <acpd binary> [acpd flags...]
import { drive, spawnAcpd, start } from "./harness.mjs";
import * as acp from "@agentclientprotocol/sdk";

const [workspace, bin, ...acpdArgs] = process.argv.slice(2);
const summary = { steps: [], sdkErrors: [], availableCommands: [] };

const client = start(summary, "interop client", 90_000);

if (!workspace || !bin) {
  summary.fatal = "usage: node client.mjs <workspace> <acpd binary> [acpd flags...]";
  client.emit();
  process.exit(2);
}

// ACPD_INTEROP_WIRE names a file that receives every line of the wire.
const acpd = spawnAcpd(bin, acpdArgs);

// step is the prompt being observed; the handlers below record into it and
// call its hooks.
let step = null;

function newStep(name, hooks = {}) {
  return {
    name,
    hooks,
    toolCalls: 0,
    toolCallUpdates: 0,
    statuses: {},
    failures: {},
    parents: {},
    updateKinds: {},
    permissions: [],
    text: "",
  };
}

function allowOnce(params) {
  const opt = params.options.find((o) => o.kind === "allow_once");
  if (!opt) {
    throw new Error(`no allow_once option among ${JSON.stringify(params.options)}`);
  }
  return { outcome: { outcome: "selected", optionId: opt.optionId } };
}

const app = acp
  .client({ name: "acpd-interop" })
  .onRequest("session/request_permission", async ({ params }) => {
    const s = step;
    s.permissions.push({
      toolCallId: params.toolCall.toolCallId,
      title: params.toolCall.title ?? null,
      optionKinds: params.options.map((o) => o.kind),
    });
    if (s.hooks.onPermission) {
      return s.hooks.onPermission(params);
    }
    return allowOnce(params);
  })
  .onNotification("session/update", ({ params }) => {
    const u = params.update;
    if (u.sessionUpdate === "available_commands_update") {
      // Sent after session/new's answer and when the commands change.
      summary.availableCommands.push(u.availableCommands.map((c) => c.name));
      return;
    }
    const s = step;
    s.updateKinds[u.sessionUpdate] = (s.updateKinds[u.sessionUpdate] ?? 0) + 1;
    if (u.sessionUpdate === "agent_message_chunk" && u.content.type === "text") {
      s.text += u.content.text;
    } else if (u.sessionUpdate === "tool_call") {
      s.toolCalls++;
      s.statuses[u.toolCallId] = u.status ?? "pending";
      // A subagent's calls name the agent call that started them.
      const parent = u._meta?.["acpd.parentToolCallId"];
      if (parent !== undefined) {
        s.parents[u.toolCallId] = parent;
      }
    } else if (u.sessionUpdate === "tool_call_update") {
      s.toolCallUpdates++;
      if (u.status) {
        s.statuses[u.toolCallId] = u.status;
      }
      if (u.status === "failed") {
        s.failures[u.toolCallId] = (u.content ?? [])
          .filter((c) => c.type === "content" && c.content.type === "text")
          .map((c) => c.content.text)
          .join("");
      }
    }
    s.hooks.onUpdate?.(u);
  });

// prompt runs one prompt turn and records its stop reason or JSON-RPC error.
async function prompt(session, name, text, hooks) {
  step = newStep(name, hooks);
  const start = performance.now();
  try {
    const resp = await session.prompt(text);
    step.stopReason = resp.stopReason;
  } catch (err) {
    step.error = {
      requestError: err instanceof acp.RequestError,
      code: err.code ?? null,
      message: err.message,
      data: err.data ?? null,
    };
  }
  // The SDK settles a request as soon as its response line is read, while
  // notifications read before it may still be in their async handler
  // chains; one macrotask lets those chains finish so the counts are whole.
  await new Promise((resolve) => setImmediate(resolve));
  step.ms = Math.round(performance.now() - start);
  const { hooks: _, ...rec } = step;
  summary.steps.push(rec);
}

summary.exit = await drive(acp, app, acpd, summary, { name: "acpd-interop" }, async (agent, init) => {
  summary.initialize = {
    protocolVersion: init.protocolVersion,
    agentInfo: init.agentInfo ?? null,
    agentCapabilities: init.agentCapabilities ?? null,
  };

  const session = await agent.buildSession(workspace).start();
  summary.newSession = {
    sessionId: session.sessionId,
    currentModeId: session.modes?.currentModeId ?? null,
  };
  const cancel = () => agent.notify("session/cancel", { sessionId: session.sessionId });

  await prompt(session, "tools", "say hello");

  // ACP: on cancel the client answers its pending permission requests
  // with the cancelled outcome.
  await prompt(session, "cancel-while-asking", "wait while I decide", {
    onPermission: async () => {
      await cancel();
      return { outcome: { outcome: "cancelled" } };
    },
  });

  let cancelled = false;
  await prompt(session, "cancel-while-running", "sleep for a while", {
    onUpdate: (u) => {
      if (!cancelled && u.sessionUpdate === "tool_call_update" && u.status === "in_progress") {
        cancelled = true;
        void cancel();
      }
    },
  });

  await prompt(session, "loop-stopped", "loop");
  await prompt(session, "after-loop-stop", "carry on");
  // An agent call whose subagent runs a tool of its own.
  await prompt(session, "subagents", "delegate");
  // A reporting command answers without asking the model.
  await prompt(session, "help", "/help");
  session.dispose();
});
client.finish();
