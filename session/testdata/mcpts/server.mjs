// An MCP server on the official TypeScript SDK for acpd's end-to-end tests
// (session/e2e_mcp_features_test.go): the twin of the Go SDK's test server
// (session/mcp/mcptest), with the same tools, prompts and resources.
//
//   node server.mjs stdio   serves one client on stdin/stdout
//   node server.mjs http    serves Streamable HTTP on a loopback port and
//                           prints "listening <url>" on stdout
//   node server.mjs oauth ISSUER
//                           the same, behind the SDK's requireBearerAuth:
//                           tokens of the authorization server ISSUER
//                           (acpd's oauthtest), checked by introspection;
//                           adds the tool whoami (the token's client id)
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { UrlElicitationRequiredError } from '@modelcontextprotocol/sdk/types.js';
import { requireBearerAuth } from '@modelcontextprotocol/sdk/server/auth/middleware/bearerAuth.js';
import { InvalidTokenError } from '@modelcontextprotocol/sdk/server/auth/errors.js';
import express from 'express';
import { z } from 'zod';

const NOTES_URI = 'mem://notes/todo.md';
const NOTES_TEXT = '- buy milk\n- write the MCP docs';
const PIXEL = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg==';
const WAV = Buffer.from('RIFF\x24\x00\x00\x00WAVEfmt ', 'latin1').toString('base64');

const text = (t) => ({ content: [{ type: 'text', text: t }] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let running = 0;
let cancelled = 0;

function newServer({ whoami = false } = {}) {
  const server = new McpServer({ name: 'mcpts', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } });
  const none = {};

  if (whoami) {
    server.registerTool('whoami', { description: 'Names the OAuth client whose token the call carried.', inputSchema: none },
      async (_args, extra) => text(`client=${extra.authInfo?.clientId} scopes=${extra.authInfo?.scopes.join(',')}`));
  }

  server.registerTool('echo', { description: 'Echoes its text argument.', inputSchema: { text: z.string() } },
    async ({ text: t }) => text('echo: ' + t));

  server.registerTool('slow', { description: 'Sleeps for ms milliseconds or until cancelled.', inputSchema: { ms: z.number().int() } },
    async ({ ms }, extra) => {
      running++;
      try {
        await new Promise((resolve, reject) => {
          const timer = setTimeout(resolve, ms);
          extra.signal.addEventListener('abort', () => { clearTimeout(timer); cancelled++; reject(new Error('cancelled')); });
        });
        return text(`slept ${ms}ms`);
      } finally {
        running--;
      }
    });

  server.registerTool('stats', { description: 'Reports how many slow calls are running and how many were cancelled.', inputSchema: none },
    async () => text(`running=${running} cancelled=${cancelled}`));

  server.registerTool('everything', { description: 'Returns one block of every content type and structured content.', inputSchema: none },
    async () => ({
      content: [
        { type: 'text', text: 'all kinds' },
        { type: 'image', mimeType: 'image/png', data: PIXEL },
        { type: 'audio', mimeType: 'audio/wav', data: WAV },
        { type: 'resource_link', uri: NOTES_URI, name: 'todo.md', mimeType: 'text/markdown', size: NOTES_TEXT.length },
        { type: 'resource', resource: { uri: 'mem://inline.txt', mimeType: 'text/plain', text: 'inline text' } },
        { type: 'resource', resource: { uri: 'mem://blob.bin', mimeType: 'application/octet-stream', blob: 'AQID' } },
      ],
      structuredContent: { kinds: 6 },
    }));

  let added = false;
  server.registerTool('add_tool', { description: 'Adds the tool "added" (the server then says its tools changed).', inputSchema: none },
    async () => {
      if (!added) {
        added = true;
        server.registerTool('added', { description: 'Added at run time.', inputSchema: none }, async () => text('I was added'));
      }
      return text('tool added');
    });

  server.registerTool('progress', { description: 'Reports progress three times, then answers.', inputSchema: none },
    async (_args, extra) => {
      const token = extra._meta?.progressToken;
      for (let i = 1; i <= 3 && token !== undefined; i++) {
        await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: 3, message: `step ${i}` } });
        await sleep(150);
      }
      return text('progressed');
    });

  server.registerTool('ask_form', { description: 'Asks the user for a name and a colour (form elicitation).', inputSchema: none },
    async () => {
      const res = await server.server.elicitInput({
        mode: 'form',
        message: 'Who are you?',
        requestedSchema: {
          type: 'object',
          properties: {
            name: { type: 'string', title: 'Name', minLength: 1 },
            color: { type: 'string', title: 'Colour', enum: ['red', 'green'] },
          },
          required: ['name'],
        },
      });
      return text(`form: action=${res.action} name=${res.content?.name} color=${res.content?.color}`);
    });

  server.registerTool('ask_url', { description: 'Asks the user to open a page (URL elicitation).', inputSchema: none },
    async () => {
      const res = await server.server.elicitInput({ mode: 'url', message: 'Open the consent page', url: 'https://example.com/consent?flow=1', elicitationId: 'el-1' });
      if (res.action === 'accept') {
        await server.server.createElicitationCompletionNotifier('el-1')();
      }
      return text('url: action=' + res.action);
    });

  let consented = false;
  server.registerTool('needs_url', { description: 'Answers -32042 until the user opened a page.', inputSchema: none },
    async () => {
      if (consented) {
        return text('needs_url: done after consent');
      }
      consented = true;
      // The user finishes on the page a moment later.
      setTimeout(() => { server.server.createElicitationCompletionNotifier('el-2')().catch(() => {}); }, 500);
      throw new UrlElicitationRequiredError([{ mode: 'url', message: 'Sign in to the archive first', url: 'https://example.com/archive-login', elicitationId: 'el-2' }]);
    });

  server.registerPrompt('greet', {
    description: 'Greets someone.',
    argsSchema: { name: z.string().describe('whom to greet'), style: z.string().optional().describe('how') },
  }, ({ name, style }) => ({
    messages: [{ role: 'user', content: { type: 'text', text: `Greet ${name} in a ${style || 'plain'} way.` } }],
  }));
  server.registerPrompt('with_resource', { description: 'Asks about the notes, which it embeds.' }, () => ({
    messages: [
      { role: 'user', content: { type: 'text', text: 'What is left to do?' } },
      { role: 'user', content: { type: 'resource', resource: { uri: NOTES_URI, mimeType: 'text/markdown', text: NOTES_TEXT } } },
    ],
  }));

  server.registerResource('todo.md', NOTES_URI, { mimeType: 'text/markdown', description: 'The to-do list.' },
    async () => ({ contents: [{ uri: NOTES_URI, mimeType: 'text/markdown', text: NOTES_TEXT }] }));
  server.registerResource('user', new ResourceTemplate('mem://users/{id}', { list: undefined }), { mimeType: 'text/plain', description: 'A user by id.' },
    async (uri, { id }) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: `user ${id}` }] }));
  return server;
}

const mode = process.argv[2];
if (mode === 'stdio') {
  console.error('mcpts starting');
  await newServer().connect(new StdioServerTransport());
} else if (mode === 'http' || mode === 'oauth') {
  const transports = new Map();
  // serve answers one MCP request: a new session at initialize, the
  // session's transport after.
  const serve = async (req, res, body) => {
    const sid = req.headers['mcp-session-id'];
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid || body?.method !== 'initialize') {
        res.writeHead(sid ? 404 : 400).end();
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => transports.set(id, transport),
      });
      transport.onclose = () => transports.delete(transport.sessionId);
      await newServer({ whoami: mode === 'oauth' }).connect(transport);
    }
    await transport.handleRequest(req, res, body);
  };
  if (mode === 'http') {
    const http = createServer(async (req, res) => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      await serve(req, res, chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined);
    });
    http.listen(0, '127.0.0.1', () => {
      console.log(`listening http://127.0.0.1:${http.address().port}/mcp`);
    });
  } else {
    const issuer = process.argv[3];
    let resource;
    // The authorization server's tokens, checked by introspection
    // (RFC 7662): the resource server keeps no state of its own.
    const verifier = {
      async verifyAccessToken(token) {
        const r = await fetch(`${issuer}/introspect`, { method: 'POST', body: new URLSearchParams({ token }) });
        const info = await r.json();
        if (!info.active) {
          throw new InvalidTokenError('token is not active');
        }
        return { token, clientId: info.client_id, scopes: (info.scope || '').split(' ').filter(Boolean), expiresAt: info.exp, resource: new URL(info.aud) };
      },
    };
    const app = express();
    app.use(express.json());
    app.get('/.well-known/oauth-protected-resource/mcp', (_req, res) => {
      res.json({ resource, authorization_servers: [issuer], scopes_supported: ['mcp'], bearer_methods_supported: ['header'] });
    });
    let auth;
    app.all('/mcp', (req, res, next) => auth(req, res, next), (req, res) => serve(req, res, req.body));
    const http = app.listen(0, '127.0.0.1', () => {
      resource = `http://127.0.0.1:${http.address().port}/mcp`;
      auth = requireBearerAuth({
        verifier,
        expectedResource: new URL(resource),
        resourceMetadataUrl: `http://127.0.0.1:${http.address().port}/.well-known/oauth-protected-resource/mcp`,
      });
      console.log(`listening ${resource}`);
    });
  }
} else {
  console.error('usage: node server.mjs stdio|http|oauth ISSUER');
  process.exit(2);
}
