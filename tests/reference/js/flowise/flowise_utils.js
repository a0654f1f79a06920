'use strict';
// The two functions of flowise-components 3.1.4's src/utils.js that its BufferWindowMemory.js
// calls (src/utils.js itself loads the whole component library, so the driver points the node's
// require at this file): getBaseClasses, the class names up a class's prototype chain, and
// mapChatMessageToBaseMessage for rows without file uploads (an apiMessage row becomes an
// AIMessage of its content, or of '' when it has none; a userMessage row a HumanMessage likewise).

const path = require('node:path');
const { createRequire } = require('node:module');

const { AIMessage, HumanMessage } = createRequire(path.join(__dirname, 'package.json'))('@langchain/core/messages');

exports.getBaseClasses = (targetClass) => {
  const out = [];
  let c = targetClass;
  while (c) {
    const up = Object.getPrototypeOf(c);
    if (!(up && up !== Object && up.name)) break;
    c = up;
    if (!['BaseLangChain', 'Serializable'].includes(c.name)) out.push(c.name);
  }
  return out;
};

exports.mapChatMessageToBaseMessage = async (rows = []) => {
  const out = [];
  for (const m of rows) {
    if (m.role === 'apiMessage' || m.type === 'apiMessage') out.push(new AIMessage(m.content || ''));
    else if (m.role === 'userMessage' || m.type === 'userMessage') out.push(new HumanMessage(m.content || ''));
  }
  return out;
};
