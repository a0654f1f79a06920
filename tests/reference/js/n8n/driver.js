'use strict';
// n8n's chat memory as n8n 2.41.1 runs it, turn by turn over generated conversations.
//
// Real code: n8n's Simple Memory node (MemoryBufferWindow.node.js, its session map and idle
// clean-up), LangChain JS as n8n pins it (BufferWindowMemory and BufferMemory from
// @langchain/classic 1.0.27, trimMessages and the chat models' token counter from
// @langchain/core 1.2.8, ChatOpenAI from @langchain/openai 1.4.4), and n8n's own agent memory
// functions from the published @n8n/n8n-nodes-langchain tarballs: loadMemory, saveToMemory,
// buildSteps and buildResponseMetadata of 2.41.1, and saveToMemory and buildSteps of 2.2.0 (the
// last release that stored tool rounds as a "[Used tools: …]" prefix), with the nodeNameToToolName
// of the n8n-workflow release each one pins.
// Glue written here, each piece citing the n8n file it follows: what the Simple Memory node imports
// from modules that cannot load here (n8n_stand_ins.js), the memory nodes' choice of memory class, the Postgres and Redis stores, and the agent's engine loop that runs tools between
// model calls.
//
// Input (stdin): {"counter": "download" | "unreachable", "cases": [case, ...]}; a case is
// {"name", "mode": "window" | "agent" | "lifetime", "settings": {...}, "turns": [{"input", "rounds",
// "output"}]} where a round is the list of tool calls one model reply made ({"id", "name", "args",
// "result"}); a lifetime turn has no rounds but a `minute` and the node's `k` at that moment.
// Output: {"versions": {...}, "outcomes": {name: {"turns": [{"sent", "tokens"?}], "stored", "rows"?}}}:
// per turn the history the memory hands over (and, for the agent, each message's token count), then
// what the memory holds at the end (a Postgres store also as its table rows).

const path = require('node:path');
const { createRequire } = require('node:module');
const common = require('../common.js');

const HERE = __dirname;
const req = createRequire(path.join(HERE, 'package.json'));
const NODES = '@n8n/n8n-nodes-langchain';

const input = common.readCases();
const warnings = common.answerTokenizerDownloads(req, input.counter);

const memoryNodes = common.sourcePath(HERE, NODES, '2.41.1', 'dist/nodes/memory');
const standIns = path.join(HERE, 'n8n_stand_ins.js');
common.redirectRequires([
  ...['n8n-workflow', '../../../utils/helpers', '@n8n/ai-utilities'].map((request) => ({ from: memoryNodes, request, to: standIns })),
  ...['2.41.1', '2.2.0'].map((release) => ({
    from: path.join(HERE, 'node_modules', '.platform', `${NODES}@${release}`),
    request: 'n8n-workflow',
    to: common.sourcePath(HERE, 'n8n-workflow', release === '2.41.1' ? '2.41.0' : '2.2.0', 'dist/cjs/tool-helpers.js'),
  })),
]);

const agentFile = (release, name) => common.sourcePath(HERE, NODES, release, `dist/utils/agent-execution/${name}.js`);
const n8n = {
  '2.41.1': {
    memory: require(agentFile('2.41.1', 'memoryManagement')),
    steps: require(agentFile('2.41.1', 'buildSteps')),
    metadata: require(agentFile('2.41.1', 'buildResponseMetadata')).buildResponseMetadata,
  },
  '2.2.0': {
    memory: require(agentFile('2.2.0', 'memoryManagement')),
    steps: require(agentFile('2.2.0', 'buildSteps')),
    // nodes/agents/Agent/agents/ToolsAgent/V3/helpers/buildResponseMetadata.js of 2.2.0 (its module
    // imports the whole agent-execution index, so its three lines are written here).
    metadata: (response, itemIndex) => ({
      previousRequests: n8n['2.2.0'].steps.buildSteps(response, itemIndex),
      itemIndex,
      iterationCount: (response?.metadata?.iterationCount ?? 0) + 1,
    }),
  },
};

const { BufferMemory, BufferWindowMemory } = req('@langchain/classic/memory');
const { BaseListChatMessageHistory, InMemoryChatMessageHistory } = req('@langchain/core/chat_history');
const { mapChatMessagesToStoredMessages, mapStoredMessagesToChatMessages } = req('@langchain/core/messages');
const { ChatOpenAI } = req('@langchain/openai');

// The n8n_chat_histories table as @langchain/community 1.1.27's PostgresChatMessageHistory keeps it
// (stores/message/postgres.js): each message one row, its stored form flattened ({...data, type})
// into a JSONB column, read back in id order.
class PostgresRows extends BaseListChatMessageHistory {
  constructor() { super(); this.lc_namespace = ['memlens', 'postgres']; this.rows = []; }
  async addMessage(message) {
    const { data, type } = mapChatMessagesToStoredMessages([message])[0];
    this.rows.push(JSON.parse(JSON.stringify({ ...data, type })));
  }
  async getMessages() {
    return mapStoredMessagesToChatMessages(this.rows.map(({ type, ...data }) => ({ type, data })));
  }
}

// A Redis list as @langchain/redis 1.0.1's RedisChatMessageHistory keeps it (chat_histories.js):
// LPUSH of each stored message's JSON, read with LRANGE 0 -1 and reversed.
class RedisList extends BaseListChatMessageHistory {
  constructor() { super(); this.lc_namespace = ['memlens', 'redis']; this.list = []; }
  async addMessage(message) { this.list.unshift(JSON.stringify(mapChatMessagesToStoredMessages([message])[0])); }
  async getMessages() { return mapStoredMessagesToChatMessages([...this.list].reverse().map((m) => JSON.parse(m))); }
}

// The memory a node supplies, as its supplyData builds it in 2.41.1:
// MemoryBufferWindow.node.js (every version: BufferWindowMemory, k = contextWindowLength),
// MemoryPostgresChat.node.js (typeVersion < 1.1: BufferMemory, no window) and
// MemoryRedisChat.node.js (typeVersion < 1.3: BufferMemory, no window).
function memoryOf(settings) {
  const store = settings.memory;
  const chatHistory = store === 'postgres' ? new PostgresRows() : store === 'redis' ? new RedisList()
    : new InMemoryChatMessageHistory();
  const unwindowed = (store === 'postgres' && settings.node_version < 1.1)
    || (store === 'redis' && settings.node_version < 1.3);
  const fields = { memoryKey: 'chat_history', chatHistory, returnMessages: true, inputKey: 'input', outputKey: 'output' };
  return unwindowed ? new BufferMemory(fields) : new BufferWindowMemory({ ...fields, k: settings.k });
}

// What n8n's engine hands the agent back after running one round of tool calls
// (an EngineResponse: each action's node output as ai_tool items). A tool's result here is the
// text the model reads, buildSteps' observation: the JSON of the tool node's output items.
function engineResponse(round, metadata) {
  return {
    actionResponses: round.map((call) => ({
      action: { id: call.id, nodeName: call.name, input: call.args, type: 'ai_tool',
                actionType: 'ExecutionNodeAction', metadata: { itemIndex: 0 } },
      data: { data: { ai_tool: [JSON.parse(call.result).map((json) => ({ json }))] } },
    })),
    metadata,
  };
}

// One turn of the Tools Agent V3 (nodes/agents/Agent/agents/ToolsAgent/V3/helpers/runAgent.js):
// every model call starts with loadMemory; a reply with tool calls goes back to the engine, which
// runs them and calls the agent again with their results (buildSteps); the final reply is saved
// with saveToMemory when there is an input and an output. The memory does not change inside a
// turn, so each model call of the turn loads the same history: the first load is reported.
async function agentTurn(release, memory, turn, load) {
  const code = n8n[release];
  const sent = await load();
  let response;
  for (const round of turn.rounds) {
    response = engineResponse(round, code.metadata(response, 0));
    await load();
  }
  const steps = code.steps.buildSteps(response, 0);
  if (memory && turn.input && turn.output) {
    if (release === '2.41.1') {
      await code.memory.saveToMemory(turn.input, turn.output, memory, steps, response?.metadata?.previousRequests?.length);
    } else {
      await code.memory.saveToMemory(turn.input, turn.output, memory, steps);
    }
  }
  return sent;
}

// One turn of a Tools Agent V1/V2 (nodes/agents/Agent/agents/ToolsAgent/V2/execute.js): a
// LangChain AgentExecutor holding the memory, which saves the input and the output after the run
// (@langchain/classic chains/base.js: memory.saveContext), whatever the output is.
async function executorTurn(memory, turn, load) {
  const sent = await load();
  await memory.saveContext({ input: turn.input }, { output: turn.output });
  return sent;
}

// Simple Memory's own lifetime (MemoryBufferWindow.node.js): each turn the agent asks the node for
// its memory (supplyData), which keeps one BufferWindowMemory per workflow and session in a
// process-wide map, created with the Context Window Length of that moment, and first drops every
// buffer not used for an hour. A turn's `minute` sets the clock; its `k` is the node's parameter.
const { MemoryBufferWindow } = require(path.join(memoryNodes, 'MemoryBufferWindow', 'MemoryBufferWindow.node.js'));
const RealDate = Date;

async function lifetime(c) {
  const start = RealDate.UTC(2024, 11, 7, 8, 0);
  let now = start;
  globalThis.Date = class extends RealDate {
    constructor(...args) { super(...(args.length ? args : [now])); }
    static now() { return now; }
  };
  try {
    const node = new MemoryBufferWindow();
    const turns = [];
    for (const turn of c.turns) {
      now = start + turn.minute * 60_000;
      const ctx = {
        sessionId: c.name,
        getNodeParameter: (name) => (name === 'contextWindowLength' ? turn.k : undefined),
        getWorkflow: () => ({ id: 'workflow' }),
        getNode: () => ({ typeVersion: c.settings.node_version }),
      };
      const memory = (await node.supplyData.call(ctx, 0)).response;
      const sent = (await memory.loadMemoryVariables({})).chat_history;
      await memory.saveContext({ input: turn.input }, { output: turn.output });
      turns.push({ sent: sent.map(common.plain) });
    }
    return { turns };
  } finally {
    globalThis.Date = RealDate;
  }
}

async function runCase(c) {
  if (c.mode === 'lifetime') return lifetime(c);
  const s = c.settings;
  const memory = memoryOf(s);
  const model = new ChatOpenAI({ model: s.model || 'gpt-4o-mini', apiKey: 'offline' });
  const load = c.mode === 'agent'
    ? () => n8n['2.41.1'].memory.loadMemory(memory, model, s.max_tokens_from_memory ?? undefined)
    : async () => (await memory.loadMemoryVariables({})).chat_history;
  const turns = [];
  for (const turn of c.turns) {
    const sent = s.agent === '2' ? await executorTurn(memory, turn, load)
      : await agentTurn(s.agent === '3@2.2.0' ? '2.2.0' : '2.41.1', memory, turn, load);
    const out = { sent: sent.map(common.plain) };
    if (c.mode === 'agent') out.tokens = await Promise.all(sent.map((m) => model.getNumTokens(m.content)));
    turns.push(out);
  }
  // What the memory holds after the last turn: every turn's saved messages, in the shape it keeps them.
  const stored = (await memory.chatHistory.getMessages()).map(common.plain);
  return { turns, stored, ...(s.memory === 'postgres' && { rows: memory.chatHistory.rows }) };
}

common.answerCases(HERE, input, warnings, runCase);
