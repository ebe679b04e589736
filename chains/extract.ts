/**
 * `/extract`: structured extraction — a message in, a typed contact record
 * out (`withStructuredOutput` over a zod schema, so the output schema is the
 * record's).
 */
import { z } from 'zod';
import { ChatPromptTemplate, defineChain, type ChatRequest, type FakeResponse } from '../src/index.js';
import { chatModel, lastText, OFFLINE, type ChainContext } from './model.js';

export const contactSchema = z.object({
  name: z.string().nullable().describe('The full name of the person writing, or null'),
  email: z.string().nullable().describe('Their email address, or null'),
  phone: z.string().nullable().describe('Their phone number as written, or null'),
  company: z.string().nullable().describe('The organisation they are with, or null'),
  topics: z.array(z.string()).describe('What they want to discuss, a few words each'),
  notes: z.string().describe('Anything else worth knowing, in one sentence'),
});

/** An extracted contact. */
export type Contact = z.infer<typeof contactSchema>;

const prompt = ChatPromptTemplate.fromMessages([
  ['system', 'Extract the contact details of the person who wrote the message. Use null for what the message does not say.'],
  ['human', '{text}'],
]);

/** The offline model's extraction: plain rules over the text, labelled as such. */
export function extractByRules(message: string): Contact {
  // Every pattern has bounded repetition, so the rules stay linear on any input (no catastrophic backtracking).
  const text = message.slice(0, 20_000);
  const first = (pattern: RegExp): string | null => pattern.exec(text)?.[1]?.trim() ?? null;
  const topics = first(/\b(?:about|regarding|interested in)\s{1,5}([^.!?\n]{1,200})/i);
  return {
    name: first(/\b(?:my name is|I am|I'm|this is)\s{1,5}(\p{Lu}[\p{L}'-]{1,40}(?:\s{1,3}\p{Lu}[\p{L}'-]{1,40}){0,4})/u),
    email: first(/([\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,6})/),
    phone: first(/(\+?\d[\d\s().-]{6,20}\d)/),
    company: first(/\b(?:at|from|with|for)\s{1,5}(\p{Lu}[\w&-]{0,40}(?:\s{1,3}\p{Lu}[\w&-]{0,40}){0,5})/u),
    topics: topics === null ? [] : topics.split(/,|\band\b/).map((t) => t.trim()).filter((t) => t !== ''),
    notes: `${OFFLINE} these fields come from simple text rules.`,
  };
}

function offlineExtract(request: ChatRequest): FakeResponse {
  const name = request.params.tools?.[0]?.name ?? 'contact';
  return { tool_calls: [{ name, args: extractByRules(lastText(request, 'human')) }] };
}

export function extractChain(context: ChainContext) {
  const model = chatModel(context, offlineExtract);
  return defineChain({
    path: '/extract',
    description: 'Extracts a typed contact record (name, email, phone, company, topics, notes) from a message. Send {text}.',
    runnable: prompt.pipe(model.withStructuredOutput(contactSchema, { name: 'contact', description: 'The contact details found in the message' })),
    inputSchema: z.object({ text: z.string().min(1).max(20_000).describe('The message to extract from') }),
  });
}
