// Computes reference repeat keys for repeatkey_cases.json, exactly as
// qwen-code's getToolCallRepeatKey does: JSON.parse the arguments, rebuild
// every object with its keys in default sort order (a null-prototype object,
// so "__proto__" stays a plain key), JSON.stringify, prefix the canonical
// tool name and ":", and take the hex SHA-256 of the UTF-8 bytes.
//
// Usage: node repeatkey_golden.mjs repeatkey_cases.json > repeatkey_golden.json
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';

const aliases = { search_file_content: 'grep_search', replace: 'edit', task: 'agent' };

function canonicalToolName(name) {
  return Object.prototype.hasOwnProperty.call(aliases, name) ? aliases[name] : name;
}

function canonicalize(value) {
  if (Array.isArray(value)) return value.map(canonicalize);
  if (value !== null && typeof value === 'object') {
    const sorted = Object.create(null);
    for (const key of Object.keys(value).sort()) sorted[key] = canonicalize(value[key]);
    return sorted;
  }
  return value;
}

const cases = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const out = cases.map((c) => {
  const text = c.argsBase64 !== undefined
    ? Buffer.from(c.argsBase64, 'base64').toString('utf8')
    : c.args;
  const canonical = `${canonicalToolName(c.name)}:${JSON.stringify(canonicalize(JSON.parse(text)))}`;
  return {
    name: c.name,
    ...(c.argsBase64 !== undefined ? { argsBase64: c.argsBase64 } : { args: c.args }),
    canonical,
    key: createHash('sha256').update(canonical).digest('hex'),
  };
});
process.stdout.write(JSON.stringify(out, null, 1) + '\n');
