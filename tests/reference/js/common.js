'use strict';
// What the platform drivers share: reading a batch of cases from stdin, loading the platform's own
// source files (kept by the installer under node_modules/.platform/NAME@VERSION/), answering
// LangChain's tokenizer download without a network, and writing messages as plain JSON.
//
// Node built-ins only: each driver passes the `require` of its own folder, so LangChain resolves to
// the release that folder pins.

const fs = require('node:fs');
const path = require('node:path');
const Module = require('node:module');

function readCases() {
  return JSON.parse(fs.readFileSync(0, 'utf8'));
}

// Written through process.stdout, which Node drains before it exits: a pipe may take a large answer
// only part by part.
function writeAnswer(answer) {
  process.stdout.write(JSON.stringify(answer) + '\n');
}

function sourcePath(dir, pkg, version, file) {
  return path.join(dir, 'node_modules', '.platform', `${pkg}@${version}`, file);
}

// A platform file's `require(request)` answered with another file: the one module of a heavy
// dependency it uses (n8n-workflow's tool-helpers.js for buildSteps.js), or a stand-in written here
// for a module that cannot load outside the platform (Flowise's src/utils.js). `rules` is a list
// of {from: a folder of platform files, request, to: a file}.
function redirectRequires(rules) {
  const resolve = Module._resolveFilename;
  Module._resolveFilename = function (request, parent, ...rest) {
    const from = parent && parent.filename;
    for (const rule of rules) {
      if (request === rule.request && from && from.startsWith(rule.from + path.sep)) return rule.to;
    }
    return resolve.call(this, request, parent, ...rest);
  };
}

// @langchain/core counts a model's tokens with js-tiktoken ranks it downloads from
// https://tiktoken.pages.dev/js/<encoding>.json on first use (utils/tiktoken.js). Here `mode`
// decides the answer: 'download' serves the ranks js-tiktoken ships (the file that site serves);
// 'unreachable' fails the download, and LangChain counts characters / 4 and warns. A failed
// download is retried with backoff (AsyncCaller: about 84 s) and never remembered, so each count
// waits again; failing it as an abort skips the retries and gives the same count at once.
// Any other request fails: the reference runs make none.
function answerTokenizerDownloads(req, mode) {
  const warnings = { count: 0 };
  console.warn = () => { warnings.count += 1; };
  globalThis.fetch = async (url) => {
    const m = /^https:\/\/tiktoken\.pages\.dev\/js\/([a-z0-9_]+)\.json$/.exec(String(url));
    if (!m) throw new Error(`the reference run makes no network request (${url})`);
    if (mode === 'download') {
      const ranks = req(`js-tiktoken/ranks/${m[1]}`);
      return new Response(JSON.stringify(ranks.default ?? ranks), { status: 200 });
    }
    if (mode === 'unreachable') {
      const blocked = new Error('AbortError: the tokenizer download is blocked in this run');
      blocked.name = 'AbortError';
      throw blocked;
    }
    throw new Error(`unknown tokenizer mode ${mode}`);
  };
  return warnings;
}

const ROLES = { human: 'user', ai: 'assistant', tool: 'tool', system: 'system', generic: 'assistant' };

function textOf(content) {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return content == null ? '' : String(content);
  return content.map((b) => (typeof b === 'string' ? b : b && b.type === 'text' ? b.text : '')).join('');
}

// A LangChain message (or a plain {role, content} object) as {role, text, calls?, call_id?}.
function plain(message) {
  let role;
  if (typeof message.getType === 'function') role = ROLES[message.getType()];
  else if (typeof message._getType === 'function') role = ROLES[message._getType()];
  else role = message.role;
  const out = { role, text: textOf(message.content) };
  const calls = message.tool_calls;
  if (Array.isArray(calls) && calls.length) out.calls = calls.map((c) => ({ id: c.id, name: c.name, args: c.args }));
  if (role === 'tool') out.call_id = message.tool_call_id;
  return out;
}

// Runs each case with `runCase` and writes the outcomes with the versions that gave them (or the
// error, exiting 1).
function answerCases(dir, input, warnings, runCase) {
  (async () => {
    const outcomes = {};
    for (const c of input.cases) outcomes[c.name] = await runCase(c);
    writeAnswer({
      versions: versions(dir, ['@langchain/classic', '@langchain/core', '@langchain/openai', 'js-tiktoken']),
      counter: input.counter,
      tokenizer_warnings: warnings.count,
      outcomes,
    });
  })().catch((e) => { process.stderr.write(`${e.stack || e}\n`); process.exit(1); });
}

// The versions the run used: each named package as installed in `dir`, and Node.js itself.
function versions(dir, names) {
  const out = {};
  for (const name of names) {
    out[name] = JSON.parse(fs.readFileSync(path.join(dir, 'node_modules', name, 'package.json'), 'utf8')).version;
  }
  out.node = process.versions.node;
  return out;
}

module.exports = { readCases, answerCases, sourcePath, redirectRequires, answerTokenizerDownloads, plain };
