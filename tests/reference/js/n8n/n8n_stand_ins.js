'use strict';
// What n8n's Simple Memory node (MemoryBufferWindow.node.js, 2.41.1) takes from modules that cannot
// load outside n8n, as the driver runs the node itself:
// - n8n-workflow: the connection type names its description lists;
// - utils/helpers.js: getSessionId, here the session id the driver's context carries (n8n reads it
//   from the chat trigger's sessionId or the node's key expression);
// - @n8n/ai-utilities: logWrapper, a Proxy that logs each memory call into the execution and
//   forwards it (here: the memory itself), and the description's notice field.

exports.NodeConnectionTypes = { AiMemory: 'ai_memory', AiAgent: 'ai_agent' };
exports.getSessionId = (ctx) => ctx.sessionId;
exports.coerceSessionIdToString = (ctx, value) => String(value);
exports.logWrapper = (memory) => memory;
exports.getConnectionHintNoticeField = () => ({ displayName: '', name: 'notice', type: 'notice', default: '' });
