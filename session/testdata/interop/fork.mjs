// Fork client for session/interop_ts_test.go: with the official ACP
// TypeScript SDK, opens a session, runs two prompts, forks it with
// session/fork and with the /fork command, and prompts each fork (the
// /fork one after session/load). Prints one JSON summary line on stdout.
//
// usage: node fork.mjs <workspace> <acpd binary> [acpd flags...]
import { drive, spawnAcpd, start } from "./harness.mjs";
import * as acp from "@agentclientprotocol/sdk";

const [workspace, bin, ...acpdArgs] = process.argv.slice(2);
const summary = { sdkErrors: [], texts: {}, users: {} };
const client = start(summary, "fork client", 90_000);

const acpd = spawnAcpd(bin, acpdArgs);

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

summary.exit = await drive(acp, app, acpd, summary, { name: "acpd-fork" }, async (agent, init) => {
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
client.finish();
