'use strict';
// Flowise's chat memory as Flowise 3.1.4 runs it, turn by turn over generated conversations.
//
// Real code: LangChain JS as Flowise pins it (@langchain/classic 1.0.15, @langchain/core 1.1.20,
// @langchain/openai 1.2.5 for the chat model's token counter), and Flowise's Buffer Window Memory
// node itself (flowise-components 3.1.4: nodes/memory/BufferWindowMemory/BufferWindowMemory.js and
// the src/Interface.js it extends), loaded from the published tarball.
// Glue written here, each piece citing the Flowise file it follows: the chat message rows the
// server writes after each turn, the part of src/utils.js the node calls (that module loads the
// whole component library), and the Agentflow v2 Agent node's memory (its handleMemory and
// handleSummaryBuffer are methods of a node class that loads every model integration).
//
// Input (stdin): {"counter": "download" | "unreachable", "cases": [case, ...]}; a case is
// {"name", "mode": "buffer_window" | "agentflow", "settings": {...}, "turns": [{"input", "output"}]}.
// Output: {"versions": {...}, "outcomes": {name: {"turns": [{"sent", ...}]}}}.

const path = require('node:path');
const { createRequire } = require('node:module');
const common = require('../common.js');

const HERE = __dirname;
const req = createRequire(path.join(HERE, 'package.json'));
const COMPONENTS = ['flowise-components', '3.1.4'];

const input = common.readCases();
const warnings = common.answerTokenizerDownloads(req, input.counter);

const { ChatOpenAI } = req('@langchain/openai');

const platformRoot = path.join(HERE, 'node_modules', '.platform', COMPONENTS.join('@'));
common.redirectRequires([{ from: platformRoot, request: '../../../src/utils', to: path.join(HERE, 'flowise_utils.js') }]);
const BufferWindowNode = require(common.sourcePath(HERE, ...COMPONENTS,
  'dist/nodes/memory/BufferWindowMemory/BufferWindowMemory.js')).nodeClass;

// The ChatMessage table as the server fills it (flowise 3.1.4 utils/buildChatflow.js and
// utils/buildAgentflow.js): after each run, one userMessage row with the question and one
// apiMessage row with the answer, read back ordered by createdDate.
class ChatMessages {
  constructor() { this.rows = []; }
  add(turn, sessionId) {
    const at = this.rows.length;
    this.rows.push({ role: 'userMessage', content: turn.input, sessionId, chatflowid: 'flow', createdDate: at });
    this.rows.push({ role: 'apiMessage', content: turn.output, sessionId, chatflowid: 'flow', createdDate: at + 1 });
  }
  dataSource() {
    return {
      getRepository: () => ({
        find: async ({ where, order }) => this.rows
          .filter((r) => r.sessionId === where.sessionId && r.chatflowid === where.chatflowid)
          .sort((a, b) => (order.createdDate === 'ASC' ? a.createdDate - b.createdDate : b.createdDate - a.createdDate))
          .map((r) => ({ ...r })),
      }),
    };
  }
}

// A chatflow agent with the Buffer Window Memory node (e.g. nodes/agents/ToolAgent/ToolAgent.ts):
// memory.getChatMessages(sessionId, true, prependMessages) before the run, where prependMessages
// is the request's `history` (utils/buildChatflow.js: incomingInput.history ?? []).
async function bufferWindow(c) {
  const table = new ChatMessages();
  const memory = await new BufferWindowNode().init(
    { inputs: { k: c.settings.k, sessionId: '', memoryKey: 'chat_history' } }, '',
    { appDataSource: table.dataSource(), databaseEntities: { ChatMessage: 'ChatMessage' }, chatflowid: 'flow', orgId: 'org' });
  const turns = [];
  for (const turn of c.turns) {
    const sent = await memory.getChatMessages('session', true, c.settings.history ?? []);
    turns.push({ sent: sent.map(common.plain) });
    table.add(turn, 'session');
  }
  return { turns };
}

// The Agentflow v2 Agent node's memory (flowise-components 3.1.4 nodes/agentflow/Agent/Agent.ts,
// handleMemory and handleSummaryBuffer), for the first node of a flow on text-only messages:
// the past rows as {role, content} (utils/buildAgentflow.js maps userMessage to 'user', anything
// else to 'assistant'), the current input appended, then by memory type: every message; the last
// windowSize × 2; a summary of all of them followed by the input; or, once the "role: content"
// lines count over the token limit (0 or empty means 2,000), the oldest messages summarised until
// the rest fit, the summary sent as a 'system' message ('user' when the node has a system
// message of its own) before the rest.
const lines = (messages) => messages.map((m) => `${m.role}: ${m.content}`).join('\n');

async function agentflowTurn(s, past, turn, llm, summaries) {
  const messages = s.system_message ? [{ role: 'system', content: s.system_message }] : [];
  const pastMessages = [...past, { role: 'user', content: turn.input }];
  // The node asks its chat model for the summary (DEFAULT_SUMMARIZER_TEMPLATE over the folded
  // messages' lines); here the summary names what it folded, and each request is counted.
  const summarise = async (folded) => {
    summaries.push(folded.length);
    return { text: `summary ${summaries.length} of ${folded.length} messages` };
  };
  if (s.memory_type === 'windowSize') {
    messages.push(...pastMessages.slice(-s.window_size * 2));
  } else if (s.memory_type === 'conversationSummary') {
    const summary = await summarise(pastMessages);
    messages.push({ role: 'assistant', content: summary.text });
    messages.push({ role: 'user', content: turn.input });
  } else if (s.memory_type === 'conversationSummaryBuffer') {
    const maxTokenLimit = s.max_token_limit || 2000;
    const tokenCount = await llm.getNumTokens(lines(pastMessages));
    if (tokenCount > maxTokenLimit) {
      let current = tokenCount;
      const folded = [];
      const rest = [...pastMessages];
      while (current > maxTokenLimit && rest.length > 0) {
        folded.push(rest.shift());
        current = await llm.getNumTokens(lines(rest));
      }
      const summary = await summarise(folded);
      const role = messages.some((m) => m.role === 'system') ? 'user' : 'system';
      messages.push({ role, content: `Previous conversation summary: ${summary.text}`, summary_of: folded.length });
      messages.push(...rest);
    } else {
      messages.push(...pastMessages);
    }
  } else {
    messages.push(...pastMessages);
  }
  return s.system_message ? messages.slice(1) : messages; // the node's own system message is not memory
}

async function agentflow(c) {
  const llm = new ChatOpenAI({ modelName: c.settings.model || 'gpt-4o-mini', apiKey: 'offline' });
  const past = [];
  const turns = [];
  for (const turn of c.turns) {
    const summaries = [];
    const messages = await agentflowTurn(c.settings, past, turn, llm, summaries);
    turns.push({
      sent: messages.map((m) => ({ ...common.plain(m), ...(m.summary_of !== undefined && { summary_of: m.summary_of }) })),
      summaries,
    });
    past.push({ role: 'user', content: turn.input }, { role: 'assistant', content: turn.output });
  }
  return { turns };
}

common.answerCases(HERE, input, warnings, (c) => (c.mode === 'agentflow' ? agentflow(c) : bufferWindow(c)));
