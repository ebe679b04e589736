/** Prompts: text and chat templates, placeholders, few-shot examples, prompt values. */
export { PromptTemplate, parseTemplate, templateVariables, type PromptTemplateOptions } from './template.js';
export { ChatPromptTemplate, MessagesPlaceholder, FewShotChatMessagePromptTemplate, type MessageTemplateLike } from './chat.js';
export { StringPromptValue, ChatPromptValue, isPromptValue, type PromptValue } from './prompt-value.js';
